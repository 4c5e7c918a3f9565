# Remote URLs for the remote e2e tests; sourced after lib.bash. REMOTE_KIND picks the backend:
# file (default, a folder under $WORK), or rados / s3 on the test cluster (the `remote` label's
# fixture; LAYERFS_TEST_CLUSTER names it), each run in a namespace or bucket of its own.
# new_remote_url STEM: prints a fresh URL.
REMOTE_KIND=${REMOTE_KIND:-file}
case $REMOTE_KIND in
  file) ;;
  rados | s3)
    [ -n "${LAYERFS_TEST_CLUSTER:-}" ] || fail "REMOTE_KIND=$REMOTE_KIND needs LAYERFS_TEST_CLUSTER (run through ctest)"
    eval "$("$(dirname "${BASH_SOURCE[0]}")/../remote/cluster-fixture" env "$LAYERFS_TEST_CLUSTER")"
    export AWS_ACCESS_KEY_ID=$LAYERFS_TEST_S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$LAYERFS_TEST_S3_SECRET_KEY
    unset AWS_SESSION_TOKEN
    ;;
  *) fail "unknown REMOTE_KIND $REMOTE_KIND" ;;
esac
RUN_ID=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
new_remote_url() {
  case $REMOTE_KIND in
    file) echo "file://$WORK/$1" ;;
    rados) echo "rados://$LAYERFS_TEST_RADOS_POOL/$1-$RUN_ID" ;;
    s3) echo "s3://lfs-$1-$RUN_ID?endpoint=$LAYERFS_TEST_S3_ENDPOINT" ;;
  esac
}
