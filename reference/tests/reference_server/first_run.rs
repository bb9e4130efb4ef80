//! First run: the `curl` commands the server prints work.

use serde_json::json;

use crate::{request, Server};

/// The requests of the `curl` commands the server prints beside its
/// address: each command's `-H` headers and its `-d` body.
fn printed_requests(printed: &str) -> Vec<(Vec<(String, String)>, String)> {
    let commands = printed.split("  curl ").skip(1);
    commands
        .map(|command| {
            let quoted: Vec<(&str, &str)> = command
                .split('\'')
                .collect::<Vec<_>>()
                .chunks(2)
                .filter_map(|pair| Some((pair[0].trim_end().rsplit(' ').next()?, *pair.get(1)?)))
                .collect();
            let headers = quoted
                .iter()
                .filter(|(flag, _)| *flag == "-H")
                .map(|(_, header)| {
                    let (name, value) = header.split_once(": ").expect("a header");
                    (name.to_owned(), value.to_owned())
                })
                .collect();
            let body = quoted
                .iter()
                .find(|(flag, _)| *flag == "-d")
                .map(|(_, body)| (*body).to_owned())
                .expect("a body");
            (headers, body)
        })
        .collect()
}

/// What the server prints to try it works: the discovery advertises, and
/// bob's listen is acknowledged with his own notes only.
#[tokio::test]
async fn the_printed_curl_commands_work() {
    let server = Server::start().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let printed = mcp_edge_reference::try_it(&url, false);
    assert!(printed.contains("bob's listen is acknowledged with his notes only"));
    assert!(printed.contains(&format!("curl -s http://127.0.0.1:{}/mcp ", server.port)));
    let requests = printed_requests(&printed);
    assert_eq!(requests.len(), 2, "{printed}");
    let mut answers = Vec::new();
    for (headers, body) in &requests {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        answers.push(request(server.port, "POST", &headers, Some(body)).await);
    }
    let mut answers = answers.into_iter();
    let discovered = answers.next().unwrap();
    assert_eq!(discovered.status, 200);
    let discovered = discovered.message().await;
    assert!(discovered["result"]["capabilities"]["resources"]["subscribe"] == json!(true));
    let mut listen = answers.next().unwrap();
    assert_eq!(listen.status, 200);
    let ack = listen.event().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["demo://users/bob/notes"])
    );
    drop(listen);
    server.stop().await;
}

/// `--bare` prints what holds there: rmcp acknowledges bob's listen with
/// alice's notes too.
#[tokio::test]
async fn the_bare_server_prints_what_holds() {
    let server = Server::start_bare().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let printed = mcp_edge_reference::try_it(&url, true);
    assert!(!printed.contains("his notes only"), "{printed}");
    assert!(printed.contains("alice's notes too"), "{printed}");
    let (headers, body) = printed_requests(&printed).pop().expect("the listen");
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let mut listen = request(server.port, "POST", &headers, Some(&body)).await;
    assert_eq!(listen.status, 200);
    let ack = listen.event().await;
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["demo://users/alice/notes", "demo://users/bob/notes"])
    );
    drop(listen);
    server.stop().await;
}
