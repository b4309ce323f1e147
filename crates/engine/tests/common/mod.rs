pub mod realdata;
