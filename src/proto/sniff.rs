//! Which kind of server sent a reply, from its first bytes: the greetings and error replies
//! of the protocols loadgen speaks, so a URL pointed at the wrong port is named ("this looks
//! like a Redis server") instead of failing as garbage, a hang or a closed connection. Pure;
//! the probing that gets a silent server to answer is `hello`.

mod hello;
#[cfg(test)]
mod tests;

pub use hello::{greet, Hello, PING};

/// The servers the sniffer knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Postgres,
    Mysql,
    HandlerSocket,
    Memcached,
    Redis,
    Http,
    /// A TLS record (an alert to plain bytes): the port wants TLS from the first byte.
    Tls,
}

impl Kind {
    /// The name messages use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Postgres => "PostgreSQL",
            Kind::Mysql => "MySQL/MariaDB",
            Kind::HandlerSocket => "HandlerSocket",
            Kind::Memcached => "memcached",
            Kind::Redis => "Redis",
            Kind::Http => "HTTP",
            Kind::Tls => "TLS",
        }
    }

    /// The name with its article: "an HTTP", "a memcached".
    pub fn a(self) -> String {
        let article = if self == Kind::Http { "an" } else { "a" };
        format!("{article} {}", self.name())
    }

    /// The server speaks first (MySQL's greeting); the others wait for the client.
    pub fn greets(self) -> bool {
        self == Kind::Mysql
    }
}

/// The kind of server whose reply starts with `b`, or None: too few bytes to tell, or none of
/// the known ones.
pub fn kind_of(b: &[u8]) -> Option<Kind> {
    let starts = |p: &[u8]| b.starts_with(p);
    if starts(b"HTTP/1.") || starts(b"HTTP/2") {
        return Some(Kind::Http);
    }
    const MEMCACHED: [&[u8]; 9] = [
        b"ERROR\r\n",
        b"CLIENT_ERROR ",
        b"SERVER_ERROR ",
        b"VERSION ",
        b"END\r\n",
        b"STAT ",
        b"VALUE ",
        b"STORED\r\n",
        b"NOT_FOUND\r\n",
    ];
    if MEMCACHED.iter().any(|p| starts(p)) {
        return Some(Kind::Memcached);
    }
    if redis(b) {
        return Some(Kind::Redis);
    }
    if mysql(b) {
        return Some(Kind::Mysql);
    }
    if postgres(b) {
        return Some(Kind::Postgres);
    }
    if handlersocket(b) {
        return Some(Kind::HandlerSocket);
    }
    // An alert or a handshake record of TLS 1.0-1.3.
    if let [0x15 | 0x16, 3, 0..=4, ..] = b {
        return Some(Kind::Tls);
    }
    None
}

/// RESP: `-ERR ...`/`-NOAUTH ...` (an upper-case word), `+PONG`, `$n`, `:n`, `*n`, one line.
fn redis(b: &[u8]) -> bool {
    let Some(end) = b.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    let line = &b[1..end];
    match b[0] {
        b'-' => line.first().is_some_and(u8::is_ascii_uppercase),
        b'+' => line.iter().all(|c| c.is_ascii_graphic() || *c == b' '),
        b'$' | b':' | b'*' => {
            let digits = line.strip_prefix(b"-").unwrap_or(line);
            !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

/// A packet of sequence 0 (3-byte little-endian length, then 0): Handshake v10 (protocol
/// version 10, then the server's version text), or the error packet (0xff) a server sends in
/// its place (too many connections, a host not allowed).
fn mysql(b: &[u8]) -> bool {
    let [l0, l1, l2, 0, first, rest @ ..] = b else {
        return false;
    };
    let len = u32::from_le_bytes([*l0, *l1, *l2, 0]);
    match first {
        10 => (30..=1024).contains(&len) && rest.first().is_some_and(u8::is_ascii_digit),
        0xff => (3..=1024).contains(&len),
        _ => false,
    }
}

/// An authentication request (`R`, length 8 to 2048) or an ErrorResponse (`E`, whose first
/// field is the severity `S`), the two first replies of a server to a startup message.
fn postgres(b: &[u8]) -> bool {
    let [tag @ (b'R' | b'E'), l0, l1, l2, l3, rest @ ..] = b else {
        return false;
    };
    let len = u32::from_be_bytes([*l0, *l1, *l2, *l3]);
    match tag {
        b'R' => (8..=2048).contains(&len),
        _ => (8..=65536).contains(&len) && rest.first() == Some(&b'S'),
    }
}

/// A reply line `<error code>\t<number of columns>[\t...]\n`, e.g. `2\t1\tcmd\n` to a line
/// it does not know.
fn handlersocket(b: &[u8]) -> bool {
    let Some(end) = b.iter().position(|&c| c == b'\n') else {
        return false;
    };
    let mut fields = b[..end].split(|&c| c == b'\t');
    let number =
        |f: Option<&[u8]>| f.is_some_and(|f| !f.is_empty() && f.iter().all(u8::is_ascii_digit));
    number(fields.next()) && number(fields.next())
}

/// The first bytes of a reply as a message shows them: printable-escaped, short.
pub fn first_bytes(b: &[u8]) -> String {
    crate::shown::clip(b, 40)
}

/// The line for a reply from another kind of server than `want`, or for bytes no server
/// known sends (`not a memcached reply: ...`).
pub fn not_the_protocol(want: Kind, got: &[u8]) -> String {
    match kind_of(got) {
        Some(Kind::Tls) => format!(
            "not {} protocol: the port answered with a TLS record (\"{}\"): it wants TLS from the first byte",
            want.name(),
            first_bytes(got)
        ),
        Some(k) if k != want => named(want, k, got),
        _ => format!(
            "not {} reply: \"{}\" (is this {} port?)",
            want.a(),
            first_bytes(got),
            want.a()
        ),
    }
}

/// The line for a server recognised as `got` when `want` was asked for.
pub fn named(want: Kind, got: Kind, reply: &[u8]) -> String {
    format!(
        "this looks like {} server, not {}: it answered \"{}\"; point the URL at the {} server's port",
        got.a(),
        want.name(),
        first_bytes(reply),
        want.name()
    )
}

/// The line for a server that closed the connection after the client's first `want`
/// request without a byte of reply. PostgreSQL does that to bytes that are not a startup
/// message; a server of the right kind answers its own protocol.
pub fn closed_after(want: Kind) -> String {
    format!(
        "the server closed the connection after {0} request without answering: is this {0} server? (a PostgreSQL server closes on bytes that are not its startup message)",
        want.a()
    )
}

/// A PostgreSQL startup message (protocol 3.0) for `user` whose application_name ends its
/// line, so that memcached, HandlerSocket and HTTP servers answer it too (not Redis: it looks
/// for the line's end with strchr, which stops at the length's NUL). A PostgreSQL server
/// answers with an authentication request or an error.
pub fn startup_probe(user: &str, database: &str) -> Vec<u8> {
    let mut body = 196608u32.to_be_bytes().to_vec();
    for (k, v) in [
        ("user", user),
        ("database", database),
        ("application_name", "loadgen probe\n"),
    ] {
        for s in [k, v] {
            body.extend_from_slice(s.as_bytes());
            body.push(0);
        }
    }
    body.push(0);
    let mut out = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}
