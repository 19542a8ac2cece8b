use volee_sandbox::{connect_to, Sandbox, SandboxError};

use crate::support::{docker, TestSession};

#[tokio::test]
async fn no_daemon_says_start_docker() {
    let err = connect_to("unix:///nonexistent/volee-test/docker.sock")
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::DockerNotRunning { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("Docker is not running"));
    assert!(err.hint().unwrap().contains("systemctl start docker"));
}

#[tokio::test]
async fn a_missing_image_says_what_to_do() {
    let Some(d) = docker("a_missing_image_says_what_to_do").await else {
        return;
    };
    let s = TestSession::new("noimage");
    let mut config = s.config();
    config.image = "volee-test-no-such-image:0".into();
    let err = Sandbox::start(&d, &config).await.unwrap_err();
    assert!(matches!(err, SandboxError::ImageMissing { .. }), "{err:?}");
    assert!(err.hint().unwrap().contains("--image"));
}

#[tokio::test]
async fn root_is_refused_and_bad_project_dirs_too() {
    let Some(d) = docker("root_is_refused_and_bad_project_dirs_too").await else {
        return;
    };
    let s = TestSession::new("refuse");
    let mut config = s.config();
    config.user = Some("0:0".into());
    assert!(matches!(
        Sandbox::start(&d, &config).await.unwrap_err(),
        SandboxError::ProjectDir { .. }
    ));
    let mut config = s.config();
    config.project_dir = "/nonexistent/volee-project".into();
    let err = Sandbox::start(&d, &config).await.unwrap_err();
    assert!(matches!(err, SandboxError::ProjectDir { .. }), "{err:?}");
}
