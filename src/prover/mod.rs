//! Groth16 assembly and backends.
