pub mod harness;
pub mod peers;
pub mod rawpeer;
pub mod realdata;
