//! Generates the C header from this crate with cbindgen into OUT_DIR (the crate's tests compare
//! it with the checked-in include/mcpgw.h; `MCPGW_UPDATE_HEADER=1` also writes it there), and
//! gives libmcpgw.so its SONAME.

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let header_path = crate_dir.join("../../include/mcpgw.h");
    println!("cargo:rerun-if-changed=.");
    println!("cargo:rerun-if-changed={}", header_path.display());
    println!("cargo:rerun-if-env-changed=MCPGW_UPDATE_HEADER");

    // The SONAME names the ABI: libmcpgw.so.0.<minor> for 0.x releases (each minor may change
    // the ABI), libmcpgw.so.<major> from 1.0. Libraries of different ABIs install side by side.
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("set by cargo");
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("set by cargo");
    let soname = if major == "0" {
        format!("libmcpgw.so.0.{minor}")
    } else {
        format!("libmcpgw.so.{major}")
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    println!("cargo:rustc-env=MCPGW_SONAME={soname}");

    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is readable and valid");
    let header = cbindgen::Builder::new()
        .with_src(crate_dir.join("lib.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen can generate the header from src/ffi");
    header.write_to_file(out_dir.join("mcpgw.h"));
    if std::env::var_os("MCPGW_UPDATE_HEADER").is_some_and(|v| v != "0") {
        header.write_to_file(&header_path);
    }
}
