/* Every route table of the API; a new domain's file adds its table here. */
#include "api/api_int.h"

const struct isc_api_route *const isc_api_route_tables[] = {
    isc_api_routes_access,   isc_api_routes_orgs,    isc_api_routes_experiments,
    isc_api_routes_finance,  isc_api_routes_shapes,  isc_api_routes_keys,
    isc_api_routes_catalog,  isc_api_routes_nodes,   isc_api_routes_check,
    isc_api_routes_datasets, isc_api_routes_metrics, NULL,
};
