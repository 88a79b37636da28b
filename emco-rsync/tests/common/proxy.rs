//! A TCP proxy the test controls, between one process and a server (a replica and etcd): it
//! passes, delays, stalls, cuts one direction or refuses, as a partition would.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with the bytes it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything passes.
    Pass,
    /// Every chunk waits this long each way.
    Delay(Duration),
    /// Nothing passes either way; connections stay open and what was sent is held, to be
    /// delivered (late) when the mode changes back.
    Stall,
    /// Requests reach the server, its answers are held.
    CutAnswers,
    /// Open connections are closed and new ones are closed as soon as they come.
    Refuse,
}

/// A running proxy; stops when dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.mode.send_replace(Mode::Refuse);
    }
}

/// Which way bytes go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    ToServer,
    ToClient,
}

enum Gate {
    Open(Option<Duration>),
    Held,
    Closed,
}

fn gate(mode: Mode, way: Way) -> Gate {
    match (mode, way) {
        (Mode::Pass, _) | (Mode::CutAnswers, Way::ToServer) => Gate::Open(None),
        (Mode::Delay(d), _) => Gate::Open(Some(d)),
        (Mode::Stall, _) | (Mode::CutAnswers, Way::ToClient) => Gate::Held,
        (Mode::Refuse, _) => Gate::Closed,
    }
}

/// Waits until bytes may go `way`: `None` when the connection must close.
async fn open(mode: &mut watch::Receiver<Mode>, way: Way) -> Option<Option<Duration>> {
    loop {
        let now = *mode.borrow_and_update();
        match gate(now, way) {
            Gate::Open(delay) => return Some(delay),
            Gate::Closed => return None,
            Gate::Held => mode.changed().await.ok()?,
        }
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    way: Way,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if open(&mut mode, way).await.is_none() {
            return;
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown().await;
                    return;
                }
                Ok(n) => n,
            },
            // The mode changed while nothing came: look at it again.
            r = mode.changed() => {
                if r.is_err() {
                    return;
                }
                continue;
            }
        };
        // Read, but held until the mode lets it go (a stall holds what is under way too).
        let Some(delay) = open(&mut mode, way).await else {
            return;
        };
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Proxy {
    /// A proxy on a loopback port to `server`, passing everything.
    pub async fn start(server: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Pass);
        let modes = mode.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *modes.borrow() == Mode::Refuse {
                    continue; // dropped: closed at once
                }
                let Ok(upstream) = TcpStream::connect(server).await else {
                    continue;
                };
                let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = upstream.into_split();
                tokio::spawn(pump(
                    client_read,
                    server_write,
                    modes.subscribe(),
                    Way::ToServer,
                ));
                tokio::spawn(pump(
                    server_read,
                    client_write,
                    modes.subscribe(),
                    Way::ToClient,
                ));
            }
        });
        Self { addr, mode, accept }
    }

    /// Switches what the proxy does, for open connections too.
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}
