//! Service accounts: every namespace gets a `default` ServiceAccount, as kube-controller-manager's
//! `serviceaccount` controller does on a real cluster; with [`ServiceAccounts::root_ca`], a
//! `kube-root-ca.crt` ConfigMap too (its `root-ca-cert-publisher`), and with
//! [`ServiceAccounts::legacy_tokens`] every ServiceAccount a token Secret (its
//! `serviceaccount-token` controller before 1.24).
//!
//! # Why the server does this
//!
//! Clients and test suites take these objects for granted: Kubernetes' e2e framework waits, after
//! creating each test namespace, until its `default` ServiceAccount exists and (1.2x and later)
//! its `kube-root-ca.crt` ConfigMap; 1.20's framework also waits until the account *lists a
//! secret*, and quota tests count the token secret among a namespace's secrets. Since 1.24
//! (`LegacyServiceAccountTokenNoAutoGeneration`) no token Secret is made: pods get projected,
//! short-lived tokens instead. The embedded server imitates 1.37, so it makes none unless asked.
//! With no controller manager beside the embedded server, it plays these controllers itself.
//!
//! # How data flows
//!
//! ```text
//!  store change ──► ServiceAccounts::observe
//!     namespace added/modified (not terminating)  ──► ensure `default` ServiceAccount
//!                                                 ──► ensure `kube-root-ca.crt` (if asked)
//!     `default` ServiceAccount deleted (namespace live) ──► create it again
//!     `kube-root-ca.crt` deleted (namespace live)       ──► create it again (if asked)
//!     legacy tokens only: ServiceAccount without a token secret reference
//!                                                 ──► create `<sa>-token-xxxxx` Secret,
//!                                                     list it in the account's `secrets`
//! ```
//!
//! On start it sweeps the namespaces and accounts that exist already (the built-in namespaces are
//! created before it subscribes). Its writes go through [`Api`] like a client's, with the field
//! manager `kube-controller-manager`, so watchers see them as usual. The token is a random string,
//! not a signed JWT: the embedded server does not authenticate service accounts. The CA ConfigMap
//! is off by default because kube-apiserver alone does not write it (a test that counts a
//! namespace's ConfigMaps would see it); `ca.crt` is the CA of the server's TLS certificate, empty
//! when it serves plain HTTP.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ferrokube_core::random;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::{Api, UpdateOptions, WriteOptions};
use crate::meta;
use crate::patch::PatchType;
use crate::resource::ResourceType;
use crate::store::{Change, EventType};

/// The field manager of the writes of this module.
const MANAGER: &str = "kube-controller-manager";

/// A real write by [`MANAGER`].
const WRITE: WriteOptions<'static> = WriteOptions {
    dry_run: false,
    manager: MANAGER,
};

/// The Secret type of service account tokens.
pub const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";

/// The name of the ConfigMap with the cluster's CA bundle in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// See the [module docs](self).
pub struct ServiceAccounts {
    api: Arc<Api>,
    /// Make a token Secret for every account (before 1.24). Default off.
    legacy_tokens: bool,
    /// The PEM published as `ca.crt` in every namespace's [`ROOT_CA_CONFIG_MAP`]; `None`: no
    /// such ConfigMap is published.
    root_ca: Option<String>,
}

impl ServiceAccounts {
    /// The controllers, acting through `api`: default accounts only.
    pub fn new(api: Arc<Api>) -> ServiceAccounts {
        ServiceAccounts {
            api,
            legacy_tokens: false,
            root_ca: None,
        }
    }

    /// Also give every account a token Secret, as Kubernetes did before 1.24. Default off.
    pub fn legacy_tokens(mut self, on: bool) -> ServiceAccounts {
        self.legacy_tokens = on;
        self
    }

    /// Publish `pem` (may be empty) as `ca.crt` in every namespace's [`ROOT_CA_CONFIG_MAP`].
    /// Default: no such ConfigMap.
    pub fn root_ca(mut self, pem: Option<String>) -> ServiceAccounts {
        self.root_ca = pem;
        self
    }

    /// Sweeps what exists, then follows changes until the store goes away.
    pub async fn run(self, mut changes: mpsc::UnboundedReceiver<Arc<Change>>) {
        self.sweep();
        while let Some(change) = changes.recv().await {
            self.observe(&change);
        }
    }

    fn types(&self) -> Option<(Arc<ResourceType>, Arc<ResourceType>)> {
        let accounts = self.api.registry.find("", "v1", "serviceaccounts")?;
        let secrets = self.api.registry.find("", "v1", "secrets")?;
        Some((accounts, secrets))
    }

    /// Every live namespace gets its `default` account and its CA ConfigMap; with legacy tokens,
    /// every account its token.
    fn sweep(&self) {
        for namespace in self.api.store.snapshot("namespaces") {
            self.ensure_default(&namespace.object);
            self.ensure_root_ca(&namespace.object);
        }
        if self.legacy_tokens {
            for account in self.api.store.snapshot("serviceaccounts") {
                self.ensure_token(&account.object);
            }
        }
    }

    fn observe(&self, change: &Change) {
        let object = &change.object.object;
        let live_namespace = || {
            let namespace = meta::namespace(object).unwrap_or_default();
            self.api.store.get("namespaces", namespace)
        };
        match (&*change.table, change.event) {
            ("namespaces", EventType::Added | EventType::Modified) => {
                self.ensure_default(object);
                self.ensure_root_ca(object);
            }
            ("serviceaccounts", EventType::Added | EventType::Modified) if self.legacy_tokens => {
                self.ensure_token(object)
            }
            ("serviceaccounts", EventType::Deleted) if meta::name(object) == Some("default") => {
                if let Some(ns) = live_namespace() {
                    self.ensure_default(&ns.object);
                }
            }
            ("configmaps", EventType::Deleted)
                if meta::name(object) == Some(ROOT_CA_CONFIG_MAP) =>
            {
                if let Some(ns) = live_namespace() {
                    self.ensure_root_ca(&ns.object);
                }
            }
            _ => {}
        }
    }

    /// Creates the [`ROOT_CA_CONFIG_MAP`] of a namespace that is not being deleted.
    fn ensure_root_ca(&self, namespace: &Value) {
        let Some(pem) = &self.root_ca else {
            return;
        };
        if meta::string(namespace, "deletionTimestamp").is_some() {
            return;
        }
        let (Some(name), Some(configmaps)) = (
            meta::name(namespace),
            self.api.registry.find("", "v1", "configmaps"),
        ) else {
            return;
        };
        if self
            .api
            .get(&configmaps, Some(name), ROOT_CA_CONFIG_MAP)
            .is_ok()
        {
            return;
        }
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": ROOT_CA_CONFIG_MAP, "namespace": name},
                                "data": {"ca.crt": pem}});
        if let Err(e) = self.api.create(&configmaps, Some(name), config_map, &WRITE) {
            // 409: created meanwhile; 403: the namespace started terminating.
            if e.code != 409 && e.code != 403 {
                tracing::warn!(namespace = name, error = %e, "could not publish the root CA");
            }
        }
    }

    /// Creates the `default` ServiceAccount of a namespace that is not being deleted.
    fn ensure_default(&self, namespace: &Value) {
        if meta::string(namespace, "deletionTimestamp").is_some() {
            return;
        }
        let (Some(name), Some((accounts, _))) = (meta::name(namespace), self.types()) else {
            return;
        };
        if self.api.get(&accounts, Some(name), "default").is_ok() {
            return;
        }
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "default", "namespace": name}});
        if let Err(e) = self.api.create(&accounts, Some(name), account, &WRITE) {
            // 409: created meanwhile; 403: the namespace started terminating.
            if e.code != 409 && e.code != 403 {
                tracing::warn!(namespace = name, error = %e, "could not create the default service account");
            }
        }
    }

    /// Gives an account without a token secret one. `seen` is the account as a change carried it;
    /// the decision is made on the account as stored now (an earlier change may be behind it).
    fn ensure_token(&self, seen: &Value) {
        let (Some(namespace), Some(name), Some((accounts, secrets))) =
            (meta::namespace(seen), meta::name(seen), self.types())
        else {
            return;
        };
        let Ok(current) = self.api.get(&accounts, Some(namespace), name) else {
            return;
        };
        let account = &*current.object;
        if meta::string(account, "deletionTimestamp").is_some() {
            return;
        }
        let Some(uid) = meta::uid(account) else {
            return;
        };
        let listed = account
            .get("secrets")
            .and_then(Value::as_array)
            .is_some_and(|s| !s.is_empty());
        if listed {
            return;
        }
        let secret_name = meta::generate_name(&format!("{name}-token-"));
        let token = random_token();
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": TOKEN_TYPE,
            "metadata": {"name": secret_name, "namespace": namespace, "annotations": {
                "kubernetes.io/service-account.name": name,
                "kubernetes.io/service-account.uid": uid}},
            "data": {"token": STANDARD.encode(token), "namespace": STANDARD.encode(namespace),
                     "ca.crt": STANDARD.encode(self.root_ca.as_deref().unwrap_or_default())},
        });
        if let Err(e) = self.api.create(&secrets, Some(namespace), secret, &WRITE) {
            if e.code != 403 {
                tracing::warn!(namespace, account = name, error = %e, "could not create a token secret");
            }
            return;
        }
        let patch = json!({"metadata": {"uid": uid}, "secrets": [{"name": secret_name}]});
        let options = UpdateOptions {
            manager: MANAGER,
            ..UpdateOptions::default()
        };
        let result = self.api.patch(
            &accounts,
            Some(namespace),
            name,
            PatchType::Merge,
            &patch,
            &options,
        );
        if let Err(e) = result {
            tracing::debug!(namespace, account = name, error = %e, "token secret not recorded");
            let _ = self.api.delete(
                &secrets,
                Some(namespace),
                &secret_name,
                &crate::api::DeleteOptions::default(),
                false,
            );
        }
    }
}

/// 48 random characters of `[A-Za-z0-9]`: the secret's `token`.
fn random_token() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    // Drawn through `ferrokube_core::random`, so a seeded run (the explorer's) repeats.
    (0..48)
        .map(|_| char::from(ALPHABET[random::range_u64(0, ALPHABET.len() as u64) as usize]))
        .collect()
}
