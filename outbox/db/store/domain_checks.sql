-- forget_domain_checks --
-- A domain's findings of an earlier run, before its new run is written.
DELETE FROM domain_check WHERE domain = %(domain)s;

-- save_domain_check --
-- One finding of one run.
INSERT INTO domain_check (domain, check_name, state, found, fix)
VALUES (%(domain)s, %(check)s, %(state)s, %(found)s, %(fix)s);

-- last_domain_checks --
-- The last run of every domain, with how long ago it ran.
SELECT domain, check_name, state, found, fix, checked_at,
       extract(epoch FROM now() - checked_at)::float8
FROM domain_check ORDER BY domain, checked_at, check_name;
