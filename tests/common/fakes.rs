//! Fake servers for hostile behaviour only (real servers cover the rest): each speaks just
//! enough of one protocol to get past its handshake (and answer its counters' query with none), then misbehaves as told. Loopback, own
//! port, and gone when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The protocols a fake speaks: the request framing and the reply that means "no row".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Memcached,
    Redis,
    Http,
    HandlerSocket,
}

impl Proto {
    pub const ALL: [Proto; 4] = [
        Proto::Memcached,
        Proto::Redis,
        Proto::Http,
        Proto::HandlerSocket,
    ];

    /// The target URL of a fake of this protocol on `port`.
    pub fn url(self, port: u16) -> String {
        match self {
            Proto::Memcached => format!("memcache://127.0.0.1:{port}"),
            Proto::Redis => format!("redis://127.0.0.1:{port}"),
            Proto::Http => format!("http://127.0.0.1:{port}/usr/{{key}}"),
            Proto::HandlerSocket => format!("hs://127.0.0.1:{port}/loadgen/usr"),
        }
    }

    /// The complete requests at the front of `buf`: (bytes they take, how many are lookups or
    /// writes, the handshake lines among them answered once each as OK).
    fn requests(self, buf: &[u8]) -> (usize, usize, usize) {
        let lines = |sep: &[u8]| {
            let mut end = 0;
            let mut n = 0;
            while let Some(p) = find(&buf[end..], sep) {
                end += p + sep.len();
                n += 1;
            }
            (end, n)
        };
        match self {
            // get and delete are one line; writes carry a data line: count command lines only.
            Proto::Memcached => {
                let (end, _) = lines(b"\r\n");
                let n = buf[..end]
                    .split(|&b| b == b'\n')
                    .filter(|l| {
                        ["get ", "delete ", "set ", "add ", "replace "]
                            .iter()
                            .any(|c| l.starts_with(c.as_bytes()))
                    })
                    .count();
                let hello = buf[..end]
                    .split(|&b| b == b'\n')
                    .filter(|l| l.starts_with(b"stats") || l.starts_with(b"version"))
                    .count();
                (end, n, hello)
            }
            // Read commands only (`GET usr:1`): a command starts with `*` on its own line; the
            // handshake's PING is answered once.
            Proto::Redis => {
                let (end, _) = lines(b"\r\n");
                let lines = || buf[..end].split(|&b| b == b'\n');
                let n = lines().filter(|l| l.starts_with(b"*")).count();
                let hello = lines().filter(|l| l == b"PING\r").count();
                (end, n - hello, hello)
            }
            Proto::Http => {
                let (end, n) = lines(b"\r\n\r\n");
                (end, n, 0)
            }
            // Handshake lines (`P` open_index, `A` auth) and lookups (`0\t=...`), one per line.
            Proto::HandlerSocket => {
                let (end, _) = lines(b"\n");
                let all = buf[..end].split(|&b| b == b'\n').filter(|l| !l.is_empty());
                let (mut n, mut hello) = (0, 0);
                for l in all {
                    match l.first() {
                        Some(b'P' | b'A') => hello += 1,
                        _ => n += 1,
                    }
                }
                (end, n, hello)
            }
        }
    }

    /// The reply that means "no such row" to `request` (memcached: per command; the others
    /// read only).
    fn miss(self, request: &[u8]) -> &'static [u8] {
        match self {
            Proto::Memcached => match request.split(|&b| b == b' ').next() {
                Some(b"get") => b"END\r\n",
                Some(b"delete") => b"NOT_FOUND\r\n",
                _ => b"NOT_STORED\r\n",
            },
            Proto::Redis => b"$-1\r\n",
            Proto::Http => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            Proto::HandlerSocket => b"0\t1\n",
        }
    }
}

/// How a fake misbehaves once its handshake is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Accepts and reads, never answers.
    Silent,
    /// Answers every request with the bytes 0x00..=0xFF.
    Garbage,
    /// Answers every request twice with a valid miss: out of step after the first.
    OutOfStep,
    /// Answers every request once with a valid miss, as a server with no rows would.
    Misses,
    /// Completes the login and answers lookups with misses, but never answers the query that
    /// reads the server's count before the run (the SQL fakes; the others: as `Misses`).
    HangOnCount,
    /// Answers each request with a valid miss ~1 ms after reading it, one reply per write, and
    /// the first request of a connection twice (the second ~1 ms later): the extra reply comes
    /// after the next request went out, and every later reply answers the request before the
    /// one it is taken for. Never two replies in one read, so the stream looks in step.
    LateExtra,
}

/// A running fake; stops accepting and closes its connections when dropped.
pub struct Fake {
    pub port: u16,
    pub url: String,
    stop: Arc<AtomicBool>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts a fake `proto` server that behaves as `how`, on a port of its own.
pub fn start(proto: Proto, how: Behaviour) -> Fake {
    start_for(proto, how, Duration::from_secs(120))
}

/// [`start`] for `lifetime`: then it closes its connections and refuses new ones, as a server
/// that went down.
pub fn start_for(proto: Proto, how: Behaviour, lifetime: Duration) -> Fake {
    listen(
        lifetime,
        move |s, stop| serve(s, proto, how, stop),
        |p| proto.url(p),
    )
}

/// A fake on a loopback port of its own for `lifetime`: `serve` runs on a thread of its own
/// for each connection until the stop flag it is given is set; `url` makes its URL from
/// the port. The fakes of other protocols (`fake_pg`, `fake_mysql`) start here too.
pub fn listen(
    lifetime: Duration,
    serve: impl Fn(TcpStream, &AtomicBool) + Send + Sync + Clone + 'static,
    url: impl Fn(u16) -> String,
) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        // Bounded: a test that forgets to drop its fake still ends it.
        let until = std::time::Instant::now() + lifetime;
        while !flag.load(Ordering::Relaxed) && std::time::Instant::now() < until {
            match listener.accept() {
                Ok((s, _)) => {
                    let flag = flag.clone();
                    let serve = serve.clone();
                    std::thread::spawn(move || {
                        let _ = s.set_nonblocking(false);
                        // Each reply goes out when written, as memcached and Redis send them.
                        let _ = s.set_nodelay(true);
                        serve(s, &flag)
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        flag.store(true, Ordering::Relaxed);
    });
    Fake {
        port,
        url: url(port),
        stop,
    }
}

fn serve(mut s: TcpStream, proto: Proto, how: Behaviour, stop: &AtomicBool) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let garbage: Vec<u8> = (0..=255u8).collect();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut first = true;
    while !stop.load(Ordering::Relaxed) {
        let n = match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        };
        buf.extend_from_slice(&chunk[..n]);
        let (used, requests, hello) = proto.requests(&buf);
        let commands: Vec<Vec<u8>> = buf[..used]
            .split(|&b| b == b'\n')
            .filter(|l| {
                ["get ", "delete ", "set ", "add ", "replace "]
                    .iter()
                    .any(|c| l.starts_with(c.as_bytes()))
            })
            .map(<[u8]>::to_vec)
            .collect();
        buf.drain(..used);
        let mut out = Vec::new();
        for _ in 0..hello {
            out.extend_from_slice(match proto {
                Proto::Redis => b"+PONG\r\n",
                // memcached `stats`: no counters (the run says it could not read them); `version`
                // (the preflight's first words) takes the same END, a memcached reply
                Proto::Memcached => b"END\r\n",
                _ => b"0\t1\n",
            });
        }
        for i in 0..requests {
            let miss = proto.miss(commands.get(i).map_or(&[][..], |c| &c[..]));
            match how {
                Behaviour::Silent => {}
                Behaviour::Garbage => out.extend_from_slice(&garbage),
                Behaviour::OutOfStep => {
                    out.extend_from_slice(miss);
                    out.extend_from_slice(miss);
                }
                Behaviour::Misses | Behaviour::HangOnCount => out.extend_from_slice(miss),
                Behaviour::LateExtra => {
                    let again = if std::mem::take(&mut first) { 2 } else { 1 };
                    for _ in 0..again {
                        std::thread::sleep(Duration::from_millis(1));
                        if s.write_all(&out).and_then(|_| s.write_all(miss)).is_err() {
                            return;
                        }
                        out.clear();
                    }
                }
            }
        }
        if !out.is_empty() && s.write_all(&out).is_err() {
            return;
        }
    }
}

/// A fake SQL server behaving as `how`, its connections served by `serve`, its URL `url` with
/// `{port}` filled in and `&driver=` added unless `driver` is empty (the default driver).
pub fn listen_sql(
    url: &str,
    driver: &str,
    how: Behaviour,
    serve: fn(TcpStream, Behaviour, &AtomicBool),
) -> Fake {
    let mut url = url.to_string();
    if !driver.is_empty() {
        url += &format!("&driver={driver}");
    }
    listen(
        Duration::from_secs(120),
        move |s, stop| serve(s, how, stop),
        move |p| url.replace("{port}", &p.to_string()),
    )
}

/// Reads exactly `n` bytes (a fake with a read timeout polls `stop` meanwhile); None when
/// the client is gone or the fake stops.
pub fn read_n(s: &mut TcpStream, n: usize, stop: &AtomicBool) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        match s.read(&mut buf[got..]) {
            Ok(0) => return None,
            Ok(k) => got += k,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return None,
        }
    }
    Some(buf)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
