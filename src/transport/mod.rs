//! The byte pipe under every protocol: where a target is ([`Endpoint`]: TCP `host:port` or a
//! Unix socket path, read from the URL by each protocol's own rules) and the connected
//! [`Stream`] that every driver, handshake and server counter reads and writes. Nothing here
//! knows a protocol.
//!
//! TLS goes here too, as another `Stream` variant. It is an upgrade of a connected stream, not
//! a third kind of endpoint: PostgreSQL (SSLRequest) and MySQL (SSL request packet) negotiate in
//! plain text first, so a protocol's handshake calls the upgrade when its server agrees.

mod connect;
mod endpoint;
mod listen;
mod stream;
mod tls;
mod turns;

pub use connect::{connect, connect_tls, explain, no_connection};
pub use endpoint::Endpoint;
pub use listen::Listener;
pub use stream::Stream;
pub use tls::{
    alert_line, direct, OptionNames, Roots, TlsClient, TlsInfo, TlsMode, TlsOptions, Verified,
    DIRECT_OPTIONS,
};
pub use turns::{Ticket, Turns};
