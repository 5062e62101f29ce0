-- A stored vector or halfvec whose dimension count disagrees with its size is refused with
-- data_corrupted (XX001) before any element is read, as sparsevec and bit datums are. No function
-- of the types makes such a datum; a binary-coercible cast from bytea (a superuser's CREATE CAST
-- ... WITHOUT FUNCTION: both are int-aligned varlenas) does. The payloads are little-endian: the
-- dimension count (int16), 2 unused bytes, then the elements.
\set VERBOSITY sqlstate
CREATE CAST (bytea AS vector) WITHOUT FUNCTION;
CREATE CAST (bytea AS halfvec) WITHOUT FUNCTION;

-- Well formed: 2 dimensions, 4.0 and 5.0 (float4), 1.0 and 2.0 (float2).
SELECT '\x02000000000080400000a040'::bytea::vector;
SELECT '\x02000000003c0040'::bytea::halfvec;

-- 3 dimensions in a datum that holds 2 elements, 1 in one that holds 2, none, a negative count.
SELECT '\x03000000000080400000a040'::bytea::vector;
SELECT vector_dims('\x01000000000080400000a040'::bytea::vector);
SELECT '\x00000000'::bytea::vector <-> '[1]';
SELECT l2_norm('\xffff0000003c0040'::bytea::halfvec);
SELECT '\x04000000003c0040'::bytea::halfvec <=> '[1,2,3,4]';
-- Shorter than the header.
SELECT '\x0100'::bytea::vector;

DROP CAST (bytea AS vector);
DROP CAST (bytea AS halfvec);
\set VERBOSITY default
