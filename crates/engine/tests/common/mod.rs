pub mod rawpeer;
pub mod realdata;
