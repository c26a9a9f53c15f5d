//! Where connections go and how they are secured: every address of the URL's host (or of the
//! `connect_to` override), taken in turn by new connections, and one TLS client config per
//! engine, so that every connection of the run shares its session cache and resumes.
//!
//! Everything here is built before any load: a file that cannot be read, a key that does not
//! match its certificate or a host with no address is an error of the engine's construction.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_rustls::TlsConnector;

use crate::target::{ConnectTo, Target, TlsOptions};

/// Where one engine's HTTP connections go.
pub(crate) struct Endpoint {
    addrs: Vec<SocketAddr>,
    next: AtomicUsize,
    /// Local addresses new connections bind to, in turn (empty: the kernel picks).
    sources: Vec<IpAddr>,
    next_source: AtomicUsize,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    insecure: bool,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addrs", &self.addrs)
            .field("tls", &self.tls.as_ref().map(|t| &t.1))
            .field("insecure", &self.insecure)
            .finish()
    }
}

impl Endpoint {
    pub(crate) fn new(
        target: &Target,
        connect_to: &[ConnectTo],
        tls: &TlsOptions,
    ) -> Result<Endpoint, String> {
        let (host, port) = match connect_to
            .iter()
            .find(|c| c.host.eq_ignore_ascii_case(&target.hostname) && c.port == target.port)
        {
            Some(c) => (c.to_host.as_str(), c.to_port),
            None => (target.hostname.as_str(), target.port),
        };
        if let Some(c) = connect_to
            .iter()
            .find(|c| !(c.host.eq_ignore_ascii_case(&target.hostname) && c.port == target.port))
        {
            return Err(format!(
                "connect_to: {}:{} matches no URL (the URL is {}:{})",
                c.host, c.port, target.hostname, target.port
            ));
        }
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for a in (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("url: cannot resolve {host}: {e}"))?
        {
            if !addrs.contains(&a) {
                addrs.push(a);
            }
        }
        if addrs.is_empty() {
            return Err(format!("url: no address for {host}"));
        }
        let insecure = target.tls && tls.insecure;
        let tls = if target.tls {
            let name = ServerName::try_from(target.hostname.clone())
                .map_err(|e| format!("url: {}: not a TLS server name: {e}", target.hostname))?;
            Some((TlsConnector::from(Arc::new(client_config(tls)?)), name))
        } else {
            None
        };
        Ok(Endpoint {
            addrs,
            next: AtomicUsize::new(0),
            sources: Vec::new(),
            next_source: AtomicUsize::new(0),
            tls,
            insecure,
        })
    }

    /// New connections bind to `sources` in turn before they connect (each source address
    /// has its own ephemeral ports to a server address). Each must be an address of this host,
    /// of the family of one of the server's addresses (the others are not used then).
    pub(crate) fn with_sources(mut self, sources: &[IpAddr]) -> Result<Endpoint, String> {
        if sources.is_empty() {
            return Ok(self);
        }
        for ip in sources {
            // binding to a port of 0 takes no port for long and fails for a foreign address
            UdpSocket::bind(SocketAddr::new(*ip, 0)).map_err(|e| {
                format!("source_addresses: {ip} is not an address of this host ({e})")
            })?;
        }
        let v4 = sources[0].is_ipv4();
        let server = self.addrs.clone();
        self.addrs.retain(|a| a.is_ipv4() == v4);
        if self.addrs.is_empty() {
            return Err(format!(
                "source_addresses: {} is {}, and the server's addresses are not ({server:?})",
                sources[0],
                if v4 { "IPv4" } else { "IPv6" }
            ));
        }
        self.sources = sources.to_vec();
        Ok(self)
    }

    /// The local address the next new connection binds to, if any: each in turn.
    pub(crate) fn pick_source(&self) -> Option<IpAddr> {
        if self.sources.is_empty() {
            return None;
        }
        Some(self.sources[self.next_source.fetch_add(1, Ordering::Relaxed) % self.sources.len()])
    }

    /// How many local addresses new connections bind to (0: the kernel picks one).
    pub(crate) fn source_count(&self) -> usize {
        self.sources.len()
    }

    /// How many connections can be open at once to the server before the ephemeral ports run
    /// out: the ports of `net.ipv4.ip_local_port_range` for each (source address, server
    /// address) pair (one source when none is given); None when the range cannot be read.
    pub(crate) fn port_capacity(&self) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
        let mut range = text.split_whitespace().map(|p| p.parse::<u64>().ok());
        let (low, high) = (range.next()??, range.next()??);
        let ports = high.checked_sub(low)? + 1;
        Some(ports * self.sources.len().max(1) as u64 * self.addrs.len() as u64)
    }

    /// The address of the next new connection: each in turn, so users spread over the records.
    pub(crate) fn pick(&self) -> SocketAddr {
        self.addrs[self.next.fetch_add(1, Ordering::Relaxed) % self.addrs.len()]
    }

    pub(crate) fn tls(&self) -> Option<&(TlsConnector, ServerName<'static>)> {
        self.tls.as_ref()
    }

    /// TLS without verification of the server's certificate.
    pub(crate) fn insecure(&self) -> bool {
        self.insecure
    }
}

/// The run's one client config: the system roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` honoured)
/// plus the CA files, or no verification; the client certificate; ALPN `http/1.1`.
fn client_config(o: &TlsOptions) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?;
    let builder = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider.clone())))
    } else {
        let mut roots = RootCertStore::empty();
        // unreadable entries of the system store are skipped, as every TLS client does
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        for file in &o.ca_files {
            let certs = read_certs(file).map_err(|e| format!("ca_files: {e}"))?;
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("ca_files: {file}: {e}"))?;
            }
        }
        if roots.is_empty() {
            return Err(
                "tls: no trusted certificates (the system store is empty and no CA file was given)"
                    .into(),
            );
        }
        builder.with_root_certificates(roots)
    };
    let mut cfg = match (&o.client_cert, &o.client_key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let chain = read_certs(cert).map_err(|e| format!("client_cert: {e}"))?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("client_key: {key}: {}", pem_error(e)))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| format!("client_cert: {cert} with client_key {key}: {e}"))?
        }
        _ => return Err("client_cert and client_key go together".into()),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Why a handshake failed, in few words and without the times or names rustls adds, so that
/// each cause is one entry of the failures table.
pub(crate) fn tls_reason(e: &std::io::Error) -> String {
    use rustls::{CertificateError as C, Error as E};
    let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<E>()) else {
        return match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "connection closed by the server".into(),
            std::io::ErrorKind::ConnectionReset => "connection reset by the server".into(),
            kind => format!("{kind:?}"),
        };
    };
    match inner {
        E::InvalidCertificate(c) => match c {
            C::Expired | C::ExpiredContext { .. } => "certificate expired".into(),
            C::NotValidYet | C::NotValidYetContext { .. } => "certificate not valid yet".into(),
            C::UnknownIssuer => "certificate from an unknown issuer".into(),
            C::NotValidForName => "certificate not valid for the name".into(),
            C::NotValidForNameContext { expected, .. } => {
                format!("certificate not valid for name {}", expected.to_str())
            }
            C::Revoked => "certificate revoked".into(),
            C::BadSignature => "certificate with a bad signature".into(),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                "certificate not for a TLS server".into()
            }
            other => format!("certificate rejected ({other:?})"),
        },
        E::AlertReceived(alert) => format!("the server sent alert {alert:?}"),
        E::NoApplicationProtocol => "no common ALPN protocol (http/1.1 offered)".into(),
        other => other.to_string(),
    }
}

fn read_certs(file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| format!("{file}: {}", pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{file}: {}", pem_error(e)))?;
    if certs.is_empty() {
        return Err(format!("{file}: no PEM certificate in it"));
    }
    Ok(certs)
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        rustls::pki_types::pem::Error::NoItemsFound => "no PEM item of that kind in it".into(),
        other => format!("bad PEM: {other:?}"),
    }
}

/// `insecure`: any certificate is accepted, but the handshake must still be signed by it (so
/// the run measures real TLS, not a broken one).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_addresses() {
        let t = Target::parse("http://localhost:9/mcp").expect("url");
        let e = Endpoint::new(&t, &[], &TlsOptions::default()).expect("resolved");
        assert!(e.addrs.iter().all(|a| a.ip().is_loopback()));
        let picks: Vec<_> = (0..e.addrs.len() * 2).map(|_| e.pick()).collect();
        for a in &e.addrs {
            assert_eq!(picks.iter().filter(|p| *p == a).count(), 2);
        }
        let aim = ConnectTo::parse("localhost:9:127.0.0.2:7").expect("parsed");
        let e = Endpoint::new(&t, &[aim], &TlsOptions::default()).expect("aimed");
        assert_eq!(
            e.addrs,
            ["127.0.0.2:7".parse::<SocketAddr>().expect("addr")]
        );
        let other = ConnectTo::parse("elsewhere:9:127.0.0.2:7").expect("parsed");
        let err = Endpoint::new(&t, &[other], &TlsOptions::default()).expect_err("no match");
        assert!(err.contains("matches no URL"), "{err}");
    }

    #[test]
    fn tls_files_are_checked() {
        let missing = TlsOptions {
            ca_files: vec!["/nonexistent/ca.pem".into()],
            ..Default::default()
        };
        let err = client_config(&missing).expect_err("missing file");
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
        let half = TlsOptions {
            client_cert: Some("/x".into()),
            insecure: true,
            ..Default::default()
        };
        assert!(client_config(&half)
            .expect_err("half")
            .contains("go together"));
        assert!(client_config(&TlsOptions {
            insecure: true,
            ..Default::default()
        })
        .is_ok());
    }
}
