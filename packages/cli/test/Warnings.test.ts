/**
 * Server warnings on kfleet's stderr, as kubectl prints them, against a real `koder-fleet dev`:
 * a pod violating `baseline` applied into a namespace that enforces `privileged` and warns at
 * `restricted` is created and prints PodSecurity's `Warning: would violate PodSecurity
 * "restricted:latest": …` line; `create deployment` (a raw request) and `rollout restart` (core's
 * typed client) warn about the Deployment's template; a command that writes nothing warns nothing.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { start, type Dev } from "./fixtures/Dev.js"
import { kfleet as run, type RunOptions } from "./fixtures/Kfleet.js"

const namespace = `apiVersion: v1
kind: Namespace
metadata:
  name: warned
  labels:
    pod-security.kubernetes.io/enforce: privileged
    pod-security.kubernetes.io/warn: restricted
`

const privileged = `apiVersion: v1
kind: Pod
metadata:
  name: privileged
  namespace: warned
spec:
  containers:
    - name: main
      image: busybox
      command: ["sleep", "3600"]
      securityContext:
        privileged: true
`

describe("kfleet prints the server's warnings", () => {
  let dir: string
  let dev: Dev
  const kfleet = (args: ReadonlyArray<string>, options: RunOptions = {}) => run(args, { kubeconfig: dev.kubeconfig, ...options })

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kfleet-warn-"))
    dev = await start(join(dir, "data"), ["--listen", "127.0.0.1:0", "--node-name", "warntest"])
  }, 130_000)

  afterAll(async () => {
    await dev?.stop()
    await rm(dir, { recursive: true, force: true })
  }, 20_000)

  it("apply: the pod is created and PodSecurity's warning goes to stderr as kubectl's", async () => {
    const ns = await kfleet(["apply", "-f", "-"], { stdin: namespace })
    expect(ns).toEqual({ code: 0, out: "namespace/warned created\n", err: "" })
    const file = join(dir, "pod.yaml")
    await writeFile(file, privileged)
    const applied = await kfleet(["apply", "-f", file])
    expect(applied.code).toBe(0)
    expect(applied.out).toBe("pod/privileged created\n")
    const lines = applied.err.split("\n").filter(Boolean)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^Warning: would violate PodSecurity "restricted:latest": privileged \(container "main" must not set securityContext\.privileged=true\), /)
    expect(lines[0]).toContain('runAsNonRoot != true (pod or container "main" must set securityContext.runAsNonRoot=true)')
    // Reading writes nothing and warns nothing.
    const got = await kfleet(["get", "pod", "privileged", "-n", "warned", "-o", "name"])
    expect(got).toEqual({ code: 0, out: "pod/privileged\n", err: "" })
  })

  it("create deployment and rollout restart: the template warns on the raw and the typed client's paths", async () => {
    const created = await kfleet(["create", "deployment", "web", "--image", "busybox", "-n", "warned"])
    expect(created.code).toBe(0)
    expect(created.out).toBe("deployment.apps/web created\n")
    const template = /^Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false \(container "busybox" must set securityContext\.allowPrivilegeEscalation=false\).*\n$/
    expect(created.err).toMatch(template)
    // rollout restart patches the template through core's typed client (Client.patch).
    const restarted = await kfleet(["rollout", "restart", "deployment/web", "-n", "warned"])
    expect(restarted.code).toBe(0)
    expect(restarted.out).toBe("deployment.apps/web restarted\n")
    expect(restarted.err).toMatch(template)
  })
})
