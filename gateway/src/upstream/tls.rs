//! TLS for `https://` upstreams: rustls (ring), trusting the Mozilla roots compiled into the
//! binary (so an image without a CA bundle still works), plus the image's own bundle and
//! `SSL_CERT_FILE` when present (so a private CA installed in the sandbox is honoured).

use std::path::Path;
use std::sync::{Arc, LazyLock};

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Where CA bundles usually live: Debian/Ubuntu/Alpine, Fedora/RHEL, and others.
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

static CONFIG: LazyLock<Result<rustls::ClientConfig, String>> = LazyLock::new(build);

/// The client TLS configuration every HTTP upstream shares (built once).
pub fn client_config() -> Result<rustls::ClientConfig, String> {
    CONFIG.clone()
}

fn add_bundle(roots: &mut RootCertStore, path: &Path) -> usize {
    let Ok(certs) = CertificateDer::pem_file_iter(path) else {
        return 0;
    };
    let certs: Vec<CertificateDer<'static>> = certs.filter_map(Result::ok).collect();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    added
}

fn build() -> Result<rustls::ClientConfig, String> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let extra = std::env::var_os("SSL_CERT_FILE");
    let bundles = extra
        .iter()
        .map(Path::new)
        .chain(SYSTEM_BUNDLES.iter().map(Path::new));
    for bundle in bundles {
        let added = add_bundle(&mut roots, bundle);
        if added > 0 {
            tracing::debug!("trusting {added} certificates from {}", bundle.display());
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The HTTP client speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_builds_with_the_compiled_in_roots() {
        let config = client_config().unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
        let mut roots = RootCertStore::empty();
        assert_eq!(add_bundle(&mut roots, Path::new("/no/such/bundle.pem")), 0);
    }
}
