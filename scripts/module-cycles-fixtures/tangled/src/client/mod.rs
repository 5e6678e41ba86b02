// Circle 2, first half: an item named through the crate root's re-export (`pub use config::Config`).
use crate::Config;

pub struct Retry;

pub struct Client {
    pub config: Config,
}
