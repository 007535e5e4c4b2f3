#!/usr/bin/env bash
# The mock clouds' timing model (issue 46; docs/mock-cloud.md, "Timing model"): its draws
# against their parameters (launch-to-SSH spread per family, the launch bucket, image pull
# and dataset fetch on a node, correlated interruptions, notices), in the model, the node's
# docker stand-in and the running mock. Python unittest, seed fixed and printed (TIMING_SEED).
exec /usr/bin/python3 "$(dirname "$0")/../mocks/test-timing"
