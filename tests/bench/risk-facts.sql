-- Every risk fact a refresh could store, for the bench of `isc shapes --gpus 16` (issue 43):
-- :now is replaced with the time in ms. Values vary with the row so the ranking has work.
BEGIN;
-- a Spot Advisor band for every AWS spot shape
INSERT OR REPLACE INTO risk_facts
  SELECT provider, region, '', instance_type, 'spot', 'spot-advisor', 0,
         CASE length(instance_type) % 5 WHEN 0 THEN 5 WHEN 1 THEN 10 WHEN 2 THEN 15 WHEN 3 THEN 20 ELSE 100 END,
         length(instance_type) % 5, '<5%', :now
  FROM shapes WHERE spot <> 0 AND provider = 'aws';
-- placement scores for every gang size 1..48, region-wide and for three zones
WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 48),
     z(zone) AS (SELECT '' UNION ALL SELECT 'az1' UNION ALL SELECT 'az2' UNION ALL SELECT 'az3')
INSERT OR REPLACE INTO risk_facts
  SELECT s.provider, s.region, z.zone, s.instance_type, 'spot', 'placement-score', t.n,
         1 + (length(s.region) + t.n) % 10, 0, '3 type(s)', :now
  FROM shapes s, t, z WHERE s.spot <> 0 AND s.provider = 'aws';
-- an OCI capacity report per AD and gang size 1..16
WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 16),
     ad(i) AS (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3)
INSERT OR REPLACE INTO risk_facts
  SELECT s.provider, s.region, upper(s.region) || '-AD-' || ad.i, s.instance_type, '',
         'oci-capacity', t.n, (t.n * ad.i) % 7,  0,
         CASE WHEN (t.n * ad.i) % 7 = 0 THEN 'OUT_OF_HOST_CAPACITY' ELSE 'AVAILABLE' END, :now
  FROM shapes s, t, ad WHERE s.provider = 'oci';
-- a history row for every shape (and an interruption on some)
INSERT OR REPLACE INTO risk_facts
  SELECT provider, region, '', instance_type, CASE WHEN spot <> 0 THEN 'spot' ELSE 'ondemand' END,
         'history', 0, length(id) % 3, 86400 * 4, '', :now
  FROM shapes;
COMMIT;
