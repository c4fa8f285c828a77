//! A server that accepts, reads and never answers: what a hung memcached, Redis, PostgreSQL or
//! MySQL looks like from the client. Loopback only; its threads end with the test process.

use std::io::Read;
use std::net::TcpListener;

pub struct Silent {
    pub port: u16,
}

impl Silent {
    /// Listens on a free loopback port; every connection is read and never answered.
    pub fn start() -> Silent {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
                });
            }
        });
        Silent { port }
    }
}
