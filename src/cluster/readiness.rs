//! A node's Ready condition, read one way everywhere: the rollback, the restore check, the waits, the zones and the
//! timeline's view all ask the same question of the same field.

use k8s_openapi::api::core::v1::{Node, NodeCondition};

/// The node's Ready condition, if its kubelet ever reported one.
pub fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")
}

/// Ready and True: the node takes pods.
pub fn is_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status == "True")
}

/// A Ready condition other than True (False or Unknown); a node without one is not counted as down.
pub fn is_not_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status != "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> Node {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn ready_reads_the_ready_condition_only() {
        let ready = node(serde_json::json!({"metadata": {"name": "a"}, "status": {"conditions": [
            {"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]}}));
        assert!(is_ready(&ready) && !is_not_ready(&ready));
        let unknown = node(serde_json::json!({"metadata": {"name": "b"}, "status": {"conditions": [
            {"type": "Ready", "status": "Unknown"}]}}));
        assert!(!is_ready(&unknown) && is_not_ready(&unknown));
        // A node no kubelet has reported on yet is neither.
        let fresh = node(serde_json::json!({"metadata": {"name": "c"}}));
        assert!(!is_ready(&fresh) && !is_not_ready(&fresh) && ready_condition(&fresh).is_none());
    }
}
