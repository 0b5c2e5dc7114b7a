//! What the manager's watch caches keep of an object: everything but `metadata.managedFields`.
//!
//! `managedFields` records which field manager wrote which fields, for server-side apply. The
//! API server keeps it; nothing in POM reads it from a cache (POM applies with its own field
//! managers and lets the server resolve ownership). It is most of a cached PlatformOperator:
//! POM's status writes are recorded there field by field, and a heap profile of the manager at
//! 1,000 POs found 28 of its 82 MiB of heap in the `managedFields` of cached POs
//! (`docs/benchmarks.md`). Every reflector of the manager is fed through [`cached_watcher`].

use futures::Stream;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

/// A watch of `api` whose objects come without `managedFields`, for a reflector to cache.
pub fn cached_watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, config).modify(forget_managed_fields::<K>)
}

/// A controller for `api`, built as `Controller::new` builds it (a reflector whose applied
/// objects trigger reconciles), with its cache fed through [`cached_watcher`]; and its store.
pub fn cached_controller<K>(api: Api<K>, config: watcher::Config) -> (Controller<K>, Store<K>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let objects = reflector::reflector(writer, cached_watcher(api, config)).applied_objects();
    (Controller::for_stream(objects, store.clone()), store)
}

/// Drops what the caches need not keep (see the module documentation): `None`, not an empty
/// list, so that its buffer goes too.
fn forget_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use pom_api::PlatformOperator;
    use serde_json::json;

    #[test]
    fn cached_objects_lose_managed_fields_and_nothing_else() {
        let mut seen = json!({
            "apiVersion": "platform.openshift.io/v1alpha1",
            "kind": "PlatformOperator",
            "metadata": {
                "name": "a",
                "resourceVersion": "7",
                "labels": {"x": "y"},
                "managedFields": [{"manager": "pom", "operation": "Apply",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"package": {"name": "a"}}
        });
        let mut po: PlatformOperator = serde_json::from_value(seen.clone()).unwrap();
        super::forget_managed_fields(&mut po);
        seen["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert!(po.metadata.managed_fields.is_none());
        let kept = serde_json::to_value(&po).unwrap();
        assert_eq!(kept["metadata"], seen["metadata"]);
        assert_eq!(kept["spec"]["package"], seen["spec"]["package"]);
    }
}
