//! Running pure computation on helper threads inside a PostgreSQL process: threads PostgreSQL did
//! not create must never call PostgreSQL nor run its signal handlers, so every helper thread is
//! created with all signals blocked ([`strata_lsm::threads`]).

pub use strata_lsm::threads::{run_on_helper, search_pool, with_signals_blocked};
