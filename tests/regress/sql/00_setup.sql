-- The extension installs cleanly into an empty database.
CREATE EXTENSION pg_strata;
SELECT extname FROM pg_extension WHERE extname = 'pg_strata';
