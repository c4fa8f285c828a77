//! Target URLs: `scheme://[user[:password]@]host[:port][/path][?k=v&...]`.
//! Parsed by hand (no `url` crate) because we need exactly this, and because the password must
//! never leak: `redacted()` is the only way a URL reaches a report, a log or a metric label.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct TargetUrl {
    pub scheme: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// Path without the leading '/', percent-decoded per segment by the caller where needed.
    pub path: String,
    pub query: Vec<(String, String)>,
}

// Debug would print the password: show the redacted form instead.
impl fmt::Debug for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TargetUrl({})", self.redacted())
    }
}

impl TargetUrl {
    pub fn parse(s: &str) -> Result<TargetUrl, String> {
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            format!(
                "bad target '{}': expected a URL like postgres://user@127.0.0.1:5432/db",
                redact_str(s)
            )
        })?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-')
        {
            return Err(format!(
                "bad target '{}': the scheme is not valid",
                redact_str(s)
            ));
        }
        let (authority, path_query) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => match rest.find('?') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            },
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(ui) => match ui.split_once(':') {
                Some((u, p)) => (Some(decode(u)?), Some(decode(p)?)),
                None => (Some(decode(ui)?), None),
            },
        };
        let (host, port) = split_host_port(hostport)
            .map_err(|e| format!("bad target '{}': {e}", redact_str(s)))?;
        if host.is_empty() {
            return Err(format!("bad target '{}': no host", redact_str(s)));
        }
        let (path, query) = match path_query.split_once('?') {
            Some((p, q)) => (p, q),
            None => (path_query, ""),
        };
        let mut pairs = Vec::new();
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            pairs.push((decode(k)?, decode(v)?));
        }
        Ok(TargetUrl {
            scheme,
            user: user.filter(|u| !u.is_empty()),
            password,
            host,
            port,
            path: path.to_string(),
            query: pairs,
        })
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// host:port for connecting; IPv6 hosts get brackets.
    pub fn host_port(&self, default_port: u16) -> String {
        let port = self.port.unwrap_or(default_port);
        if self.host.contains(':') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }

    /// The URL as it may be shown anywhere: the password (and secret-like params) replaced.
    pub fn redacted(&self) -> String {
        let mut s = format!("{}://", self.scheme);
        if let Some(u) = &self.user {
            s.push_str(u);
            if self.password.is_some() {
                s.push_str(":***");
            }
            s.push('@');
        }
        if self.host.contains(':') {
            s.push_str(&format!("[{}]", self.host));
        } else {
            s.push_str(&self.host);
        }
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        if !self.path.is_empty() {
            s.push('/');
            s.push_str(&self.path);
        }
        if !self.query.is_empty() {
            let q: Vec<String> = self
                .query
                .iter()
                .map(|(k, v)| {
                    if is_secret_param(k) {
                        format!("{k}=***")
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect();
            s.push('?');
            s.push_str(&q.join("&"));
        }
        s
    }
}

pub fn is_secret_param(k: &str) -> bool {
    matches!(
        k.to_ascii_lowercase().as_str(),
        "password" | "pass" | "secret" | "pwd"
    )
}

/// Best-effort redaction of a string that did not even parse as a URL.
pub fn redact_str(s: &str) -> String {
    if let Some((scheme, rest)) = s.split_once("://") {
        if let Some(at) = rest.rfind('@') {
            let ui = &rest[..at];
            if let Some((u, _)) = ui.split_once(':') {
                return format!("{scheme}://{u}:***@{}", &rest[at + 1..]);
            }
        }
    }
    s.to_string()
}

fn split_host_port(hp: &str) -> Result<(String, Option<u16>), String> {
    if let Some(rest) = hp.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or("unclosed '[' in the host")?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(parse_port(p)?),
            None if after.is_empty() => None,
            None => return Err("junk after the IPv6 host".into()),
        };
        return Ok((h.to_string(), port));
    }
    match hp.rsplit_once(':') {
        Some((h, p)) => Ok((h.to_string(), Some(parse_port(p)?))),
        None => Ok((hp.to_string(), None)),
    }
}

fn parse_port(p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("port '{p}' is not a number from 1 to 65535")),
    }
}

/// Percent-decoding of URL parts.
pub fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(v) => out.push(v),
                None => return Err("bad percent-escape in the URL (use %XX)".into()),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the URL decodes to invalid UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_url() {
        let u = TargetUrl::parse("postgres://bob:s%40cret@127.0.0.1:5432/db?mode=x").unwrap();
        assert_eq!(u.scheme, "postgres");
        assert_eq!(u.user.as_deref(), Some("bob"));
        assert_eq!(u.password.as_deref(), Some("s@cret"));
        assert_eq!(u.host, "127.0.0.1");
        assert_eq!(u.port, Some(5432));
        assert_eq!(u.path, "db");
        assert_eq!(u.param("mode"), Some("x"));
        assert_eq!(u.redacted(), "postgres://bob:***@127.0.0.1:5432/db?mode=x");
        assert!(!format!("{u:?}").contains("cret"));
    }

    #[test]
    fn ipv6_and_no_port() {
        let u = TargetUrl::parse("memcache://[::1]:11211").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.host_port(1), "[::1]:11211");
        let u = TargetUrl::parse("http://localhost/usr/{key}").unwrap();
        assert_eq!(u.port, None);
        assert_eq!(u.path, "usr/{key}");
    }

    #[test]
    fn secrets_in_params_are_redacted() {
        let u = TargetUrl::parse("hs://127.0.0.1:9998/db/usr?secret=abc&index=PRIMARY").unwrap();
        assert_eq!(
            u.redacted(),
            "hs://127.0.0.1:9998/db/usr?secret=***&index=PRIMARY"
        );
    }

    #[test]
    fn bad_urls() {
        for bad in [
            "127.0.0.1:5432",
            "postgres://",
            "postgres://h:99999/db",
            "postgres://h:x/db",
            "pg://[::1/db",
            "a b://h",
        ] {
            let e = TargetUrl::parse(bad).unwrap_err();
            assert!(!e.is_empty());
        }
        let e = TargetUrl::parse("postgres://u:hunter2@h:0/db").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4000, .. Default::default() })]

        /// Any string: parse never panics, and an Ok result never shows its password.
        #[test]
        fn parse_never_panics(s in "\\PC{0,80}") {
            if let Ok(u) = TargetUrl::parse(&s) {
                let _ = u.host_port(1);
                let r = u.redacted();
                if let Some(p) = u.password.as_deref().filter(|p| p.len() >= 4) {
                    let needle = format!(":{}@", p);
                    proptest::prop_assert!(!r.contains(&needle));
                }
            }
        }

        /// URL-shaped input with a password: parsed, and the password is gone from the redacted form.
        #[test]
        fn passwords_never_survive_redaction(
            scheme in "(postgres|mysql|hs|memcache|http)",
            user in "[a-z]{1,8}",
            pass in "[A-Za-z0-9]{6,16}",
            host in "(127\\.0\\.0\\.1|localhost|\\[::1\\])",
            port in 1u16..,
            path in "[a-z/]{0,12}",
        ) {
            let s = format!("{scheme}://{user}:{pass}@{host}:{port}/{path}");
            let u = TargetUrl::parse(&s).unwrap();
            proptest::prop_assert_eq!(u.password.as_deref(), Some(pass.as_str()));
            proptest::prop_assert!(!u.redacted().contains(&pass));
            let debug = format!("{:?}", u);
            proptest::prop_assert!(!debug.contains(&pass));
        }
    }
}
