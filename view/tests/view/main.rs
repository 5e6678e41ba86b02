//! The live view (`ferrokube_view`) over HTTP and in a real browser (headless Chromium, installed
//! by `scripts/chromium.sh` when missing).

mod chromium;
mod connection_abuse;
mod http;
