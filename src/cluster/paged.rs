//! Lists read in pages (`limit` and `continue`), so the list of every node of a 5,000-node cluster never sits in
//! memory whole: each page keeps only what its caller needs of it before the next one is asked for.

use std::future::Future;

use kube::api::{ListParams, ObjectList};

/// Objects a page holds at most: kubectl's own chunk size.
pub const PAGE_SIZE: u32 = 500;

/// Every page of the list `params` names, each item passed through `keep` as its page arrives; `fetch` asks for one
/// page. A continue token the API server has compacted away meanwhile is answered 410 Gone: the list then starts
/// over, once, from a fresh snapshot, as kubectl does.
pub async fn list_paged<I, T, F, Fut>(
    params: &ListParams,
    mut fetch: F,
    mut keep: impl FnMut(I) -> Option<T>,
) -> Result<Vec<T>, kube::Error>
where
    I: Clone,
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = Result<ObjectList<I>, kube::Error>>,
{
    let first = params.clone().limit(PAGE_SIZE);
    let mut next = first.clone();
    let mut kept = Vec::new();
    let mut restarted = false;
    loop {
        let page = match fetch(next.clone()).await {
            Ok(page) => page,
            Err(kube::Error::Api(status)) if status.code == 410 && next.continue_token.is_some() && !restarted => {
                restarted = true;
                kept.clear();
                next = first.clone();
                continue;
            }
            Err(e) => return Err(e),
        };
        kept.extend(page.items.into_iter().filter_map(&mut keep));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => next = first.clone().continue_token(&token),
            None => return Ok(kept),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http::{Request, Response};
    use k8s_openapi::api::core::v1::Node;
    use kube::client::Body;
    use kube::{Api, Client, ResourceExt};

    use super::*;

    /// An API server holding nodes n0..n(count-1), served `page` at a time whatever limit is asked (a server may
    /// return fewer than asked); it answers 410 Gone to the first continue token when `expire_first_token`. Every
    /// request's query is recorded.
    fn nodes_server(count: usize, page: usize, expire_first_token: bool) -> (Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let expired = Arc::new(Mutex::new(!expire_first_token));
        let service = tower::service_fn(move |req: Request<Body>| {
            let query = req.uri().query().unwrap_or_default().to_string();
            log.lock().unwrap().push(query.clone());
            let start: usize = query
                .split('&')
                .find_map(|p| p.strip_prefix("continue="))
                .map(|t| t.trim_start_matches("from-").parse().unwrap())
                .unwrap_or(0);
            let gone = start > 0 && !std::mem::replace(&mut *expired.lock().unwrap(), true);
            let (status, body) = if gone {
                (
                    410,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                        "reason": "Expired", "message": "The provided continue parameter is too old"}),
                )
            } else {
                let end = (start + page).min(count);
                let items: Vec<_> = (start..end)
                    .map(|i| serde_json::json!({"metadata": {"name": format!("n{i}"), "labels": {"gpu": (i % 3 == 0).to_string()}}}))
                    .collect();
                let token = if end < count { format!("from-{end}") } else { String::new() };
                (
                    200,
                    serde_json::json!({"kind": "NodeList", "apiVersion": "v1",
                        "metadata": {"resourceVersion": "7", "continue": token}, "items": items}),
                )
            };
            let response = Response::builder().status(status).body(Body::from(serde_json::to_vec(&body).unwrap()));
            async move { Ok::<_, std::convert::Infallible>(response.unwrap()) }
        });
        (Client::new(service, "default"), seen)
    }

    fn gpu_names(node: Node) -> Option<String> {
        (node.labels().get("gpu").map(String::as_str) == Some("true")).then(|| node.name_any())
    }

    #[tokio::test]
    async fn every_page_is_read_with_a_limit_and_only_what_is_kept_stays() {
        let (client, seen) = nodes_server(7, 3, false);
        let nodes: Api<Node> = Api::all(client);
        let params = ListParams::default().labels("a=b");
        let kept = list_paged(
            &params,
            |p| {
                let nodes = nodes.clone();
                async move { nodes.list(&p).await }
            },
            gpu_names,
        )
        .await
        .unwrap();
        assert_eq!(kept, ["n0", "n3", "n6"]);
        let queries = seen.lock().unwrap().clone();
        assert_eq!(queries.len(), 3, "{queries:?}");
        assert!(queries.iter().all(|q| q.contains("limit=500") && q.contains("labelSelector=a%3Db")), "{queries:?}");
        assert!(!queries[0].contains("continue="));
        assert!(queries[1].contains("continue=from-3") && queries[2].contains("continue=from-6"), "{queries:?}");
    }

    /// The names of every node, read in pages.
    async fn all_names(client: Client) -> Vec<String> {
        let nodes: Api<Node> = Api::all(client);
        let fetch = |p: ListParams| {
            let nodes = nodes.clone();
            async move { nodes.list(&p).await }
        };
        list_paged(&ListParams::default(), fetch, |n: Node| Some(n.name_any())).await.unwrap()
    }

    #[tokio::test]
    async fn a_list_that_fits_one_page_is_one_request() {
        let (client, seen) = nodes_server(2, 500, false);
        assert_eq!(all_names(client).await, ["n0", "n1"]);
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn an_expired_continue_token_starts_the_list_over_once() {
        let (client, seen) = nodes_server(5, 2, true);
        assert_eq!(all_names(client).await, ["n0", "n1", "n2", "n3", "n4"], "nothing kept twice");
        let queries = seen.lock().unwrap().clone();
        // first page, the expired token, first page again, then the rest.
        assert_eq!(queries.len(), 5, "{queries:?}");
        assert!(!queries[2].contains("continue="), "{queries:?}");
    }

    #[tokio::test]
    async fn metadata_lists_page_too() {
        let (client, seen) = nodes_server(4, 2, false);
        let nodes: Api<Node> = Api::all(client);
        let fetch = |p: ListParams| {
            let nodes = nodes.clone();
            async move { nodes.list_metadata(&p).await }
        };
        let kept = list_paged(&ListParams::default(), fetch, |n| Some(n.name_any())).await.unwrap();
        assert_eq!(kept, ["n0", "n1", "n2", "n3"]);
        assert_eq!(seen.lock().unwrap().len(), 2);
    }
}
