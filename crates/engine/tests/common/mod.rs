pub mod peers;
pub mod rawpeer;
pub mod realdata;
