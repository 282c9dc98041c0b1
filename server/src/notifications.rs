//! How questions reach people outside Holdpoint's pages (spec §11): the keys the channels sign with, shared by every
//! instance through the store.

use crate::channels::ChannelKeys;
use crate::config::ChannelsConfig;
use crate::store::{Store, StoreError, StoreResult};

/// The name the channel keys are stored under in `server_secrets`.
const CHANNEL_KEYS: &str = "channel_keys";

/// The keys action links and web pushes are signed with: those stored, or new ones stored now when none are, so
/// every instance and every restart signs with the same keys (a link sent by one instance is honoured by another; a
/// browser subscribed once stays subscribed). A VAPID key given in the configuration takes the stored one's place.
pub async fn channel_keys(store: &dyn Store, config: &ChannelsConfig) -> StoreResult<ChannelKeys> {
    let stored = store.server_secret(CHANNEL_KEYS, &ChannelKeys::generate().to_stored()).await?;
    let mut keys = ChannelKeys::from_stored(&stored).map_err(StoreError::Corrupt)?;
    if let Some(vapid) = &config.vapid_private_key {
        keys.vapid = vapid.clone();
    }
    Ok(keys)
}
