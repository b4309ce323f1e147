//! # ribshard-bench: convergence benchmarks of BGP daemons, side by side
//!
//! Owns the load generator (upstream speakers that announce real or synthesized tables,
//! encoded before the clock starts; downstream speakers that count what they hold), the
//! device-under-test runner (ribshard, BIRD 2, FRR bgpd, GoBGP, OpenBGPD, each with a
//! configuration generated for the scenario), the scenarios, and the report that writes the
//! convergence section of BENCHMARKS.md with its charts.
//!
//! It must never use ribshard's own routing code to decide what a receiver should hold: the
//! expected tables come from the feeds alone, so the bench checks ribshard as it checks the
//! others. It talks to the device only over BGP on 127.0.0.0/8 and reads its CPU and memory
//! from /proc.

pub mod address;
pub mod bmp;
pub mod chart;
pub mod dut;
pub mod kernel;
pub mod overload;
pub mod policy;
pub mod relay;
pub mod report;
pub mod rpki;
pub mod scale;
pub mod scenario;
pub mod show;
pub mod speaker;
pub mod table;
pub mod verdict;

/// Lowers the calling thread's priority to the DUT's management threads' (nice +10): for
/// the bench's parts that stand for machines other than the router (operators' tools, a
/// monitoring station), whose CPU here would otherwise be taken from the DUT's routing.
pub fn as_another_machine() {
    // SAFETY: setpriority on this thread only; lowering one's own priority needs no
    // privilege, and a failure leaves it as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
}
