//! Where the load goes, as the settings name it: the URL's target, the `connect_to` overrides
//! and the TLS options. Pure values, parsed and checked here; resolving them into addresses and
//! one TLS client config is `net`'s.

/// Where the MCP endpoint is, as the URL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `https://`: every connection is TLS.
    pub tls: bool,
    /// The URL's host without brackets: the TLS server name and what `--connect-to` matches.
    pub hostname: String,
    pub port: u16,
    /// `Host` header value (the URL's authority).
    pub host: String,
    /// Request target (path and query).
    pub path: String,
}

impl Target {
    /// Parse `http[s]://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Target, String> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(format!("not an http:// or https:// URL: {url}"));
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
            Some(i) => (&rest[..i], "/"),
            None => (rest, "/"),
        };
        let bad = || format!("bad host in URL: {url}");
        if authority.is_empty() || authority.contains('@') {
            return Err(bad());
        }
        let default = if tls { 443 } else { 80 };
        let (hostname, port) = split_host_port(authority, default).ok_or_else(bad)?;
        let path = match path.find('#') {
            Some(i) => &path[..i],
            None => path,
        };
        Ok(Target {
            tls,
            hostname,
            port,
            host: authority.to_string(),
            path: path.to_string(),
        })
    }

    /// Where a stdio engine's (unused) HTTP side points: an address nothing connects to.
    pub(crate) fn nowhere() -> Target {
        Target {
            tls: false,
            hostname: "127.0.0.1".into(),
            port: 9,
            host: "127.0.0.1:9".into(),
            path: "/".into(),
        }
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` as (host without brackets, port).
fn split_host_port(s: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':')?)),
        }
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty()
        || host.contains([' ', '/', '[', ']'])
        || (!s.starts_with('[') && host.contains(':'))
    {
        return None;
    }
    let port = match port {
        None => default_port,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
        Some(_) => return None,
    };
    Some((host.to_string(), port))
}

/// `HOST:PORT:ADDR:PORT`: connections meant for the URL's `HOST:PORT` go to `ADDR:PORT`; the
/// TLS name and the `Host` header stay the URL's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectTo {
    pub host: String,
    pub port: u16,
    pub to_host: String,
    pub to_port: u16,
}

impl ConnectTo {
    pub fn parse(s: &str) -> Result<ConnectTo, String> {
        let bad = || format!("{s:?}: not HOST:PORT:ADDR:PORT (IPv6 in brackets)");
        let (host, port, rest) = host_port_prefix(s).ok_or_else(bad)?;
        let rest = rest.strip_prefix(':').ok_or_else(bad)?;
        let (to_host, to_port, rest) = host_port_prefix(rest).ok_or_else(bad)?;
        if !rest.is_empty() {
            return Err(bad());
        }
        Ok(ConnectTo {
            host,
            port,
            to_host,
            to_port,
        })
    }
}

/// A `host:port` (port required) at the start of `s`, and what follows it.
fn host_port_prefix(s: &str) -> Option<(String, u16, &str)> {
    let host_end = if s.starts_with('[') {
        s.find(']')? + 1
    } else {
        s.find(':')?
    };
    let after = s[host_end..].strip_prefix(':')?;
    let port_len = after
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(after.len());
    let (host, port) = split_host_port(&s[..host_end + 1 + port_len], 0)?;
    if port_len == 0 {
        return None;
    }
    Some((host, port, &after[port_len..]))
}

/// How TLS connections are verified and authenticated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM files of CA certificates trusted beside the system store.
    pub ca_files: Vec<String>,
    /// PEM certificate chain and private key for mTLS (both or neither).
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
    /// Accept any server certificate (the handshake's signatures are still checked).
    pub insecure: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Target::parse("http://127.0.0.1:18500/mcp").expect("parsed");
        assert_eq!(
            (t.tls, t.hostname.as_str(), t.port),
            (false, "127.0.0.1", 18500)
        );
        assert_eq!(t.host, "127.0.0.1:18500");
        assert_eq!(t.path, "/mcp");
        let t = Target::parse("http://127.0.0.1").expect("parsed");
        assert_eq!(t.port, 80);
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:9000/a?b=c#frag").expect("parsed");
        assert_eq!((t.hostname.as_str(), t.port), ("::1", 9000));
        assert_eq!(t.host, "[::1]:9000");
        assert_eq!(t.path, "/a?b=c");
        let t = Target::parse("https://mcp.example.com/mcp").expect("parsed");
        assert_eq!(
            (t.tls, t.hostname.as_str(), t.port),
            (true, "mcp.example.com", 443)
        );
        assert_eq!(t.host, "mcp.example.com");
        let t = Target::parse("https://h.test?x=1").expect("parsed");
        assert_eq!(t.path, "/");
        for bad in [
            "ftp://h/",
            "h:80/mcp",
            "http:///mcp",
            "http://u@h/",
            "http://h:port/",
            "http://h:/",
            "http://[::1/",
            "http://::1/",
            "https://h:99999/",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn connect_to_parses() {
        let c = ConnectTo::parse("mcp.example.com:443:127.0.0.1:8443").expect("parsed");
        assert_eq!(
            c,
            ConnectTo {
                host: "mcp.example.com".into(),
                port: 443,
                to_host: "127.0.0.1".into(),
                to_port: 8443
            }
        );
        let c = ConnectTo::parse("[::1]:443:[fe80::1]:80").expect("parsed");
        assert_eq!((c.host.as_str(), c.to_host.as_str()), ("::1", "fe80::1"));
        for bad in [
            "",
            "h:443",
            "h:443:a",
            "h:443:a:",
            "h::a:1",
            "h:443:a:1:",
            "h:443:a:1x",
            "[::1:443:a:1",
            "h:99999:a:1",
        ] {
            assert!(ConnectTo::parse(bad).is_err(), "{bad}");
        }
    }
}
