//! Generates the C header from src/ffi with cbindgen into OUT_DIR; the crate's tests compare it
//! with the checked-in include/mcpgw.h. `MCPGW_UPDATE_HEADER=1` also writes it there.

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=include/mcpgw.h");
    println!("cargo:rerun-if-env-changed=MCPGW_UPDATE_HEADER");

    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is readable and valid");
    let header = cbindgen::Builder::new()
        .with_src(crate_dir.join("src/ffi/mod.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen can generate the header from src/ffi");
    header.write_to_file(out_dir.join("mcpgw.h"));
    if std::env::var_os("MCPGW_UPDATE_HEADER").is_some_and(|v| v != "0") {
        header.write_to_file(crate_dir.join("include/mcpgw.h"));
    }
}
