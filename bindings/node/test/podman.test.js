// The end-to-end runs through real podman containers (containers.js): podman with
// `--storage-driver vfs`, the image imported like Docker's (tests/docker/sandbox.sh with
// DOCKER pointing at a wrapper that adds the option).

import { containerTests } from './containers.js';

containerTests('podman');
