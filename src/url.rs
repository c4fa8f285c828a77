//! Target URLs: `scheme://[user[:password]@]host[:port][/path][?k=v&...]`. The host may be
//! empty when the rest says where to go (`memcache:///run/memcached.sock`,
//! `postgres://u@/db?host=/run/postgresql`): each protocol's `endpoint` decides.
//! Parsed by hand (no `url` crate) because we need exactly this, and because the password must
//! never leak: `redacted()` is the only way a URL reaches a report, a log or a metric label.

use crate::error::ConfigError;
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
    /// The query's `k=v` segments as written (not decoded), in the order of `query`: an HTTP
    /// target sends the server's own params exactly as given.
    pub query_raw: Vec<String>,
}

// Debug would print the password: show the redacted form instead.
impl fmt::Debug for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TargetUrl({})", self.redacted())
    }
}

impl TargetUrl {
    pub fn parse(s: &str) -> Result<TargetUrl, ConfigError> {
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            format!(
                "bad target '{}': expected a URL like postgres://user@127.0.0.1:5432/db",
                redact_text(s)
            )
        })?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-')
        {
            return Err(ConfigError(format!(
                "bad target '{}': the scheme is not valid",
                redact_text(s)
            )));
        }
        // The authority ends at the first '/' or '?': a query may hold paths (`?cacert=/a/ca.pem`).
        let (authority, path_query) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i + 1..]),
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
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
            .map_err(|e| format!("bad target '{}': {e}", redact_text(s)))?;
        let (path, query) = match path_query.split_once('?') {
            Some((p, q)) => (p, q),
            None => (path_query, ""),
        };
        if host.is_empty() && path.is_empty() && query.is_empty() {
            return Err(ConfigError(format!(
                "bad target '{}': no host",
                redact_text(s)
            )));
        }
        let mut pairs = Vec::new();
        let mut raw = Vec::new();
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            pairs.push((decode(k)?, decode(v)?));
            raw.push(kv.to_string());
        }
        Ok(TargetUrl {
            scheme,
            user: user.filter(|u| !u.is_empty()),
            password,
            host,
            port,
            path: path.to_string(),
            query: pairs,
            query_raw: raw,
        })
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The URL as it may be shown anywhere: the password, secret-like params and the secrets of
    /// any URL given as a param value (`?mysql=mysql://u:pw@h/db`) replaced by `***`; the rest
    /// (path, other params) kept.
    pub fn redacted(&self) -> String {
        let mut s = format!("{}://", self.scheme);
        if self.user.is_some() || self.password.is_some() {
            s.push_str(self.user.as_deref().unwrap_or(""));
            if self.password.is_some() {
                s.push_str(":***");
            }
            s.push('@');
        }
        // An IPv6 host goes back in brackets; a memcached pool's `h1:p1,h2` host is as written.
        if self.host.contains(':') && !self.host.contains(',') {
            s.push_str(&format!("[{}]", self.host));
        } else {
            s.push_str(&self.host);
        }
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        if !self.path.is_empty() {
            s.push('/');
            s.push_str(&redact_text(&self.path));
        }
        if !self.query.is_empty() {
            let q: Vec<String> = self
                .query
                .iter()
                .map(|(k, v)| format!("{k}={}", redact_value(k, v)))
                .collect();
            s.push('?');
            s.push_str(&q.join("&"));
        }
        s
    }
}

/// A query value as it may be shown: `***` for a secret-like param, a nested URL redacted.
fn redact_value(k: &str, v: &str) -> String {
    if is_secret_param(k) {
        "***".into()
    } else if v.contains("://") {
        redact_str(v)
    } else {
        redact_text(v)
    }
}

/// Param names whose value is a secret: these and any name containing one of them
/// (`sslpassword`, `auth_token`, ...), so a future option is covered without a new list.
const SECRET_PARAMS: &[&str] = &["pass", "pwd", "secret", "token"];

pub fn is_secret_param(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|s| k.contains(s))
}

/// A string meant to be one URL, as it may be shown: parsed and `redacted()` when it parses,
/// otherwise masked as free text (`redact_text`), so the path survives either way.
pub fn redact_str(s: &str) -> String {
    // A sharded target is several URLs separated by spaces.
    if s.contains(' ') {
        return s.split(' ').map(redact_str).collect::<Vec<_>>().join(" ");
    }
    match TargetUrl::parse(s) {
        Ok(u) => u.redacted(),
        Err(_) => redact_text(s),
    }
}

/// Free text that may hold URLs (an error message, a URL that does not parse): every userinfo
/// password (`scheme://user:PASSWORD@`) and every secret-like `name=VALUE` becomes `***`;
/// every other byte is kept.
pub fn redact_text(s: &str) -> String {
    let mut masks: Vec<(usize, usize)> = Vec::new();
    // Userinfo: from each `://` to the end of that URL (whitespace, a quote, or the next
    // `://`), the last `@` ends the userinfo and its first `:` starts the password. The last
    // `@` and not the first `/`: an unencoded `/` in a password must not leak either.
    let starts: Vec<usize> = s.match_indices("://").map(|(i, _)| i + 3).collect();
    for (n, &from) in starts.iter().enumerate() {
        let next = starts.get(n + 1).map_or(s.len(), |&i| i - 3);
        let end = s[from..next]
            .find(|c: char| c.is_whitespace() || "'\"<>`".contains(c))
            .map_or(next, |i| from + i);
        let region = &s[from..end];
        if let Some(at) = region.rfind('@') {
            if let Some(colon) = region[..at].find(':') {
                masks.push((from + colon + 1, from + at));
            }
        }
    }
    // Params: `name=value` where name is secret-like and starts the string or follows one of
    // `?&;` or whitespace; the value runs to `&`, whitespace or a quote.
    let b = s.as_bytes();
    for (eq, _) in s.match_indices('=') {
        let name_start = s[..eq]
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let name = &s[name_start..eq];
        let boundary = name_start == 0
            || matches!(
                b[name_start - 1],
                b'?' | b'&' | b';' | b' ' | b'\t' | b'\n' | b'(' | b',' | b'\'' | b'"'
            );
        if name.is_empty() || !boundary || !is_secret_param(name) {
            continue;
        }
        let end = s[eq + 1..]
            .find(|c: char| c == '&' || c.is_whitespace() || "'\"<>`".contains(c))
            .map_or(s.len(), |i| eq + 1 + i);
        if end > eq + 1 {
            masks.push((eq + 1, end));
        }
    }
    if masks.is_empty() {
        return s.to_string();
    }
    masks.sort();
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    for (a, z) in masks {
        if z <= pos {
            continue;
        }
        out.push_str(&s[pos..a.max(pos)]);
        if a >= pos {
            out.push_str("***");
        }
        pos = z;
    }
    out.push_str(&s[pos..]);
    out
}

fn split_host_port(hp: &str) -> Result<(String, Option<u16>), ConfigError> {
    if let Some(rest) = hp.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or("unclosed '[' in the host")?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(parse_port(p)?),
            None if after.is_empty() => None,
            None => return Err(ConfigError("junk after the IPv6 host".into())),
        };
        return Ok((h.to_string(), port));
    }
    match hp.rsplit_once(':') {
        Some((h, p)) => Ok((h.to_string(), Some(parse_port(p)?))),
        None => Ok((hp.to_string(), None)),
    }
}

fn parse_port(p: &str) -> Result<u16, ConfigError> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        // Not echoed: when a password holds an unencoded `/`, what looks like the port is
        // part of the password.
        _ => Err(
            "the port is not a number from 1 to 65535 (percent-encode / ? # @ in a password)"
                .into(),
        ),
    }
}

/// Percent-encoding of a URL part: every byte but the unreserved ones (`/` included, so a
/// socket path can be a host: `http+unix://%2Frun%2Fapp.sock/...`).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Percent-decoding of URL parts.
pub fn decode(s: &str) -> Result<String, ConfigError> {
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
                None => {
                    return Err(ConfigError(
                        "bad percent-escape in the URL (use %XX)".into(),
                    ))
                }
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ConfigError("the URL decodes to invalid UTF-8".to_string()))
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
        assert_eq!((u.host.as_str(), u.port), ("::1", Some(11211)));
        assert_eq!(u.redacted(), "memcache://[::1]:11211");
        let u = TargetUrl::parse("http://localhost/usr/{key}").unwrap();
        assert_eq!(u.port, None);
        assert_eq!(u.path, "usr/{key}");
        // A query right after the port, holding a path.
        let u = TargetUrl::parse("rediss://h:6380?cacert=/etc/ca.pem").unwrap();
        assert_eq!((u.port, u.path.as_str()), (Some(6380), ""));
        assert_eq!(u.param("cacert"), Some("/etc/ca.pem"));
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
    fn nested_urls_and_secret_params_are_redacted() {
        let s = "hs://127.0.0.1:9998/db/usr?mysql=mysql://bench:S3cretPW@127.0.0.1:3306/db&secret=abc&index=PRIMARY";
        let want = "hs://127.0.0.1:9998/db/usr?mysql=mysql://bench:***@127.0.0.1:3306/db&secret=***&index=PRIMARY";
        assert_eq!(TargetUrl::parse(s).unwrap().redacted(), want);
        assert_eq!(redact_str(s), want);
        // Nested twice, a password-only userinfo, and secret-like names beyond the four.
        let s = "hs://h/d/t?mysql=mysql://:pw1@h/db?x=1&auth_token=tk2&sslpassword=sp3";
        let r = redact_str(s);
        for secret in ["pw1", "tk2", "sp3"] {
            assert!(!r.contains(secret), "{r}");
        }
        assert!(
            r.starts_with("hs://h/d/t?mysql=mysql://:***@h/db?x=1"),
            "{r}"
        );
        // Redacting twice changes nothing.
        assert_eq!(redact_str(&r), r);
    }

    #[test]
    fn text_that_does_not_parse_keeps_its_path() {
        // An unencoded '/' in the password: the URL does not parse, the password still goes.
        let s = "postgres://u:pa/ss@127.0.0.1:5432/db?x=1";
        assert!(TargetUrl::parse(s).is_err());
        assert_eq!(redact_str(s), "postgres://u:***@127.0.0.1:5432/db?x=1");
        let e = TargetUrl::parse(s).unwrap_err();
        assert!(!e.contains("pa/ss") && !e.contains("'pa'"), "{e}");
        assert_eq!(
            redact_text("cannot reach mysql://root:hunter2@h:3306/db (x); secret=abc def&pwd=q"),
            "cannot reach mysql://root:***@h:3306/db (x); secret=*** def&pwd=***"
        );
        assert_eq!(
            redact_text("hs://h:1/db/usr?mysql=mysql://u:S3cret@h:3306/db bad"),
            "hs://h:1/db/usr?mysql=mysql://u:***@h:3306/db bad"
        );
        // Nothing to hide: the text is kept byte for byte.
        let plain = "é=1 ?x=2 a://b/c@d passes=3? no: password= (empty)";
        assert_eq!(redact_text("é=1 ?x=2 a://b/c@d"), "é=1 ?x=2 a://b/c@d");
        // A name holding a secret word is masked even in prose (`passes` holds `pass`: better
        // one value too many hidden than a password shown); an empty value has nothing to hide.
        assert_eq!(
            redact_text(plain),
            "é=1 ?x=2 a://b/c@d passes=*** no: password= (empty)"
        );
    }

    #[test]
    fn encode_is_decodes_inverse() {
        assert_eq!(encode("/run/a b.sock"), "%2Frun%2Fa%20b.sock");
        assert_eq!(decode(&encode("/é/x?&=")).unwrap(), "/é/x?&=");
    }

    #[test]
    fn socket_forms_parse_with_an_empty_host() {
        let u = TargetUrl::parse("memcache:///run/mc.sock").unwrap();
        assert_eq!((u.host.as_str(), u.path.as_str()), ("", "run/mc.sock"));
        assert_eq!(u.redacted(), "memcache:///run/mc.sock");
        let u = TargetUrl::parse("postgres://bob:pw@/db?host=/run/pg").unwrap();
        assert_eq!((u.host.as_str(), u.param("host")), ("", Some("/run/pg")));
        assert_eq!(u.redacted(), "postgres://bob:***@/db?host=/run/pg");
        let u = TargetUrl::parse("http+unix://%2Frun%2Fapp.sock/usr/{key}").unwrap();
        assert_eq!(
            (u.scheme.as_str(), u.host.as_str()),
            ("http+unix", "%2Frun%2Fapp.sock")
        );
        assert_eq!(u.redacted(), "http+unix://%2Frun%2Fapp.sock/usr/{key}");
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
                let r = u.redacted();
                if let Some(p) = u.password.as_deref().filter(|p| p.len() >= 4) {
                    let needle = format!(":{}@", p);
                    proptest::prop_assert!(!r.contains(&needle));
                }
            }
        }

        /// Any text: redaction never panics and is stable.
        #[test]
        fn redact_text_never_panics(s in "\\PC{0,80}") {
            let r = redact_text(&s);
            proptest::prop_assert_eq!(redact_text(&r), r.clone());
            let _ = redact_str(&s);
        }

        /// A password or secret anywhere in a string (URL or not, nested or not) never survives.
        #[test]
        fn secrets_never_survive_redact_str(
            outer in "(hs|http|postgres)://[a-z]{1,4}(:[A-Za-z0-9/?#]{0,6})?@?127\\.0\\.0\\.1(:[0-9a-z]{1,5})?/[a-z/]{0,8}",
            name in "(secret|password|pass|pwd|auth_token)",
            pass in "[A-Z][A-Za-z0-9]{9,15}",
            nested in proptest::bool::ANY,
            junk in "[a-z =&?@:/]{0,6}",
        ) {
            let s = if nested {
                format!("{outer}?x=1&mysql=mysql://u:{pass}@127.0.0.1:3306/db{junk}")
            } else {
                format!("{outer}?x=1&{name}={pass}{junk}")
            };
            let r = redact_str(&s);
            proptest::prop_assert!(!r.contains(&pass), "{} -> {}", s, r);
            let t = redact_text(&format!("error: {s} failed"));
            proptest::prop_assert!(!t.contains(&pass), "{} -> {}", s, t);
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
