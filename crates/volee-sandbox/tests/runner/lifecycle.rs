use std::collections::HashMap;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveImageOptionsBuilder};
use volee_sandbox::{
    build_busybox_image, image_exists, list_sandboxes, remove_leftovers, Leftovers, Sandbox,
    BUSYBOX_IMAGE, LABEL_OWNER_PID, LABEL_SANDBOX, LABEL_SESSION,
};

use crate::support::{docker, ok, TestSession};

#[tokio::test]
async fn the_container_is_removed_at_the_end() {
    let Some(d) = docker("the_container_is_removed_at_the_end").await else {
        return;
    };
    let s = TestSession::new("remove");
    let sb = Sandbox::start(&d, &s.config()).await.unwrap();
    let id = sb.id().to_string();
    let listed = list_sandboxes(&d, Some(&s.id)).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    assert_eq!(listed[0].owner_pid, Some(std::process::id()));
    assert!(listed[0].name.starts_with("volee-sbx-"));
    sb.remove().await.unwrap();
    assert!(list_sandboxes(&d, Some(&s.id)).await.unwrap().is_empty());
    assert!(d.inspect_container(&id, None).await.is_err());
}

#[tokio::test]
async fn leftovers_are_removed_by_label() {
    let Some(d) = docker("leftovers_are_removed_by_label").await else {
        return;
    };
    let s = TestSession::new("leftover");
    // A run that "crashed": its sandbox was never removed.
    let crashed = Sandbox::start(&d, &s.config()).await.unwrap();
    let crashed_id = crashed.id().to_string();
    std::mem::forget(crashed);
    // A container of a process that no longer exists (pids never go this high).
    let orphan = d
        .create_container(
            Some(
                CreateContainerOptionsBuilder::default()
                    .name(&format!("{}-orphan", s.id))
                    .build(),
            ),
            ContainerCreateBody {
                image: Some(BUSYBOX_IMAGE.into()),
                cmd: Some(vec!["true".into()]),
                labels: Some(HashMap::from([
                    (LABEL_SANDBOX.to_string(), "1".to_string()),
                    (LABEL_SESSION.to_string(), s.id.clone()),
                    (LABEL_OWNER_PID.to_string(), "999999999".to_string()),
                ])),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // A live one of this same session.
    let live = Sandbox::start(&d, &s.config()).await.unwrap();

    // Orphaned: only the dead owner's container goes.
    let removed = remove_leftovers(&d, &Leftovers::Orphaned).await.unwrap();
    assert!(removed.contains(&orphan.id), "{removed:?}");
    assert!(!removed.contains(&crashed_id) && !removed.iter().any(|r| r == live.id()));
    assert_eq!(ok(&live, "echo still-here").await, "still-here");

    // The session's: everything labelled with it.
    let removed = remove_leftovers(&d, &Leftovers::Session(s.id.clone()))
        .await
        .unwrap();
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert!(removed.contains(&crashed_id));
    assert!(list_sandboxes(&d, Some(&s.id)).await.unwrap().is_empty());
    // Removing an already removed sandbox is fine.
    live.remove().await.unwrap();
}

#[tokio::test]
async fn the_busybox_image_is_built_locally() {
    let Some(d) = docker("the_busybox_image_is_built_locally").await else {
        return;
    };
    let name = format!("volee-sandbox:test-{}", std::process::id());
    build_busybox_image(&d, &name).await.unwrap();
    assert!(image_exists(&d, &name).await.unwrap());
    let info = d.inspect_image(&name).await.unwrap();
    let config = info.config.unwrap();
    assert_eq!(
        config
            .labels
            .unwrap()
            .get("dev.volee.image")
            .map(String::as_str),
        Some("busybox")
    );
    assert!(config.env.unwrap().iter().any(|e| e.starts_with("PATH=")));
    let _ = d
        .remove_image(
            &name,
            Some(RemoveImageOptionsBuilder::default().force(true).build()),
            None,
        )
        .await;
    assert!(!image_exists(&d, &name).await.unwrap());
}
