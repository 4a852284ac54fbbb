#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpgw_fuzz::endpoint(data));
