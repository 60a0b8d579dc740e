/**
 * Images from a registry on a real node: `koder-fleet server`, `koder-fleet box --driver runc`
 * (told of the registry's CA by a registries.yaml) and a joined `koder-fleet agent`, against a
 * real registry with TLS and token auth holding images the test pushed. A Deployment of the
 * registry's busybox runs the image's own entrypoint and cmd under runc; a wrong digest is an
 * ErrImagePull/ImagePullBackOff with a clear Event; a private image runs with its pull secret.
 * And `koder-fleet dev --driver runc`: the real kubectl applies a Deployment of a registry image,
 * its rollout completes and its logs are the image's.
 */
import { execFile } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { busybox, requireRunc } from "./box/RuncFixture.js"
import { client, credentials, eventually, spawnRole, start, type FleetProcess, type RoleProcess } from "./fixtures/FleetProcess.js"
import { startRegistry, type LayerEntry, type Registry } from "./fixtures/Registry.js"

const base: Record<string, LayerEntry> = {
  "bin/busybox": { content: readFileSync(busybox), mode: 0o755 },
  ...Object.fromEntries(["sh", "cat", "echo", "sleep"].map((a) => [`bin/${a}`, { symlink: "busybox" }])),
  "etc/passwd": { content: "root:x:0:0:root:/root:/bin/sh\n" },
  tmp: { dir: true }
}

describe("a node pulls its pods' images from a registry", () => {
  let dir: string
  let registry: Registry
  let api: FleetProcess
  let box: RoleProcess
  let agent: RoleProcess
  let http: ReturnType<typeof client>
  let token: string
  let busyboxDigest: string

  const send = async (method: string, path: string, body?: unknown) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { status: r.status, json: () => r.json() as Record<string, any>, text: r.text }
  }
  const pods = async (label: string) => ((await send("GET", `/api/v1/namespaces/default/pods?labelSelector=app%3D${label}`)).json()["items"] ?? []) as Array<Record<string, any>>
  const events = async (pod: string) =>
    (((await send("GET", `/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D${pod}`)).json()["items"] ?? []) as Array<Record<string, any>>).map((e) => `${e["reason"]}: ${e["message"]}`)
  const diagnose = async () => `agent: ${agent?.stderr().slice(-1500)}\nbox: ${box?.stderr().slice(-1500)}`

  beforeAll(async () => {
    requireRunc()
    dir = await mkdtemp(join(tmpdir(), "fleet-pull-"))
    registry = await startRegistry(join(dir, "registry"))
    busyboxDigest = (await registry.push("public/busybox", "1", [base, { "etc/greeting": { content: "hello from the image\n" } }], { Entrypoint: ["/bin/sh", "-c"], Cmd: ["cat /etc/greeting; echo MODE=$MODE; exec sleep 3600"], Env: ["PATH=/bin", "MODE=image"] }, { index: true })).digest
    await registry.push("team/private", "1", [base, { "etc/greeting": { content: "private image\n" } }], { Cmd: ["/bin/sh", "-c", "cat /etc/greeting; exec sleep 3600"] })
    writeFileSync(join(dir, "registries.yaml"), `configs:\n  "${registry.host}":\n    tls:\n      ca_file: ${registry.caFile}\n`)
    api = await start(["--data-dir", join(dir, "server"), "--listen", "127.0.0.1:0"])
    const m = /--join-token (\S+) --ca-hash (\S+)/.exec(api.stdout())
    if (m === null) throw new Error(`no join line in:\n${api.stdout()}`)
    const creds = credentials(api.kubeconfig)
    token = creds.token
    http = client(api.port, creds.ca)
    box = spawnRole("box", ["--driver", "runc", "--data-dir", join(dir, "box"), "--socket", join(dir, "box.sock"), "--registries", join(dir, "registries.yaml")])
    agent = spawnRole("agent", ["--server", `https://127.0.0.1:${api.port}`, "--box-socket", join(dir, "box.sock"), "--data-dir", join(dir, "agent"), "--node-name", "puller", "--internal-ip", "127.0.0.1", "--port", "0", "--join-token", m[1]!, "--ca-hash", m[2]!])
    await eventually(
      async () => {
        if (agent.child.exitCode !== null) throw new Error(`agent exited: ${agent.stderr()}`)
        if (box.child.exitCode !== null) throw new Error(`box exited: ${box.stderr()}`)
        const n = (await send("GET", "/api/v1/nodes/puller")).json()
        return (n["status"]?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True") ? true : undefined
      },
      60_000,
      "node puller Ready"
    )
  }, 120_000)

  afterAll(async () => {
    http?.close()
    for (const p of [agent?.child, box?.child, api?.child]) if (p !== undefined && p.exitCode === null) p.kill("SIGKILL")
    await registry?.stop()
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it("a Deployment of the registry's busybox runs the image's entrypoint, cmd and env under runc", async () => {
    const created = await send("POST", "/apis/apps/v1/namespaces/default/deployments", {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "hello" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "hello" } },
        template: { metadata: { labels: { app: "hello" } }, spec: { containers: [{ name: "hello", image: `${registry.host}/public/busybox:1` }] } }
      }
    })
    expect(created.status).toBe(201)
    const pod = await eventually(async () => (await pods("hello")).find((p) => p["status"]?.phase === "Running"), 60_000, "a hello pod Running").catch(async (e) => {
      throw new Error(`${e.message}\npods: ${JSON.stringify((await pods("hello")).map((p) => p["status"]))}\n${await diagnose()}`)
    })
    const name = pod["metadata"].name as string
    // The status pins what runs: the repository digest of the index the tag pointed at.
    expect(pod["status"].containerStatuses[0].imageID).toBe(`${registry.host}/public/busybox@${busyboxDigest}`)
    const log = await eventually(async () => {
      const r = await send("GET", `/api/v1/namespaces/default/pods/${name}/log`)
      return r.status === 200 && r.text.includes("MODE=") ? r.text : undefined
    }, 20_000, "the pod's log")
    expect(log).toBe("hello from the image\nMODE=image\n")
    // Events are recorded in the background: wait for the Pulled one.
    const reasons = await eventually(async () => {
      const r = await events(name)
      return r.some((e) => e.startsWith("Pulled: ")) ? r : undefined
    }, 20_000, "the Pulled Event")
    expect(reasons).toContain(`Pulling: Pulling image "${registry.host}/public/busybox:1"`)
    expect(reasons.some((r) => r.startsWith(`Pulled: Successfully pulled image "${registry.host}/public/busybox:1" in `))).toBe(true)
  }, 90_000)

  it("a wrong digest waits in ErrImagePull then ImagePullBackOff, with the registry's answer in an Event", async () => {
    const image = `${registry.host}/public/busybox@sha256:${"1".repeat(64)}`
    expect((await send("POST", "/api/v1/namespaces/default/pods", { apiVersion: "v1", kind: "Pod", metadata: { name: "pinned-wrong", labels: { app: "wrong" } }, spec: { containers: [{ name: "c", image }] } })).status).toBe(201)
    const waiting = await eventually(
      async () => {
        const w = (await pods("wrong"))[0]?.["status"]?.containerStatuses?.[0]?.state?.waiting
        return w?.reason === "ImagePullBackOff" ? w : undefined
      },
      60_000,
      "ImagePullBackOff"
    )
    expect(waiting.message).toMatch(/manifest unknown/i)
    const reasons = await eventually(async () => {
      const r = await events("pinned-wrong")
      return r.some((e) => e.startsWith("BackOff: ")) ? r : undefined
    }, 20_000, "the BackOff Event")
    expect(reasons.some((r) => r.startsWith(`Failed: Failed to pull image "${image}": `) && /manifest unknown/i.test(r))).toBe(true)
    expect(reasons).toContain("Failed: Error: ErrImagePull")
    expect(reasons).toContain(`BackOff: Back-off pulling image "${image}"`)
  }, 90_000)

  it("a private image is refused without its pull secret and runs with it", async () => {
    const image = `${registry.host}/team/private:1`
    expect((await send("POST", "/api/v1/namespaces/default/pods", { apiVersion: "v1", kind: "Pod", metadata: { name: "no-secret", labels: { app: "nosecret" } }, spec: { containers: [{ name: "c", image }] } })).status).toBe(201)
    const refused = await eventually(
      async () => {
        const w = (await pods("nosecret"))[0]?.["status"]?.containerStatuses?.[0]?.state?.waiting
        return w?.reason === "ErrImagePull" || w?.reason === "ImagePullBackOff" ? w : undefined
      },
      60_000,
      "the private pull refused"
    )
    expect(refused.message).toMatch(/unauthorized/)
    const config = { auths: { [registry.host]: { auth: Buffer.from(`${registry.user.username}:${registry.user.password}`).toString("base64") } } }
    expect((await send("POST", "/api/v1/namespaces/default/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "pull" }, type: "kubernetes.io/dockerconfigjson", data: { ".dockerconfigjson": Buffer.from(JSON.stringify(config)).toString("base64") } })).status).toBe(201)
    expect((await send("POST", "/api/v1/namespaces/default/pods", { apiVersion: "v1", kind: "Pod", metadata: { name: "with-secret", labels: { app: "withsecret" } }, spec: { imagePullSecrets: [{ name: "pull" }], containers: [{ name: "c", image }] } })).status).toBe(201)
    await eventually(async () => ((await pods("withsecret"))[0]?.["status"]?.phase === "Running" ? true : undefined), 60_000, "the private pod Running").catch(async (e) => {
      throw new Error(`${e.message}\n${JSON.stringify((await pods("withsecret"))[0]?.["status"])}\n${await diagnose()}`)
    })
    const log = await eventually(async () => {
      const r = await send("GET", "/api/v1/namespaces/default/pods/with-secret/log")
      return r.status === 200 && r.text !== "" ? r.text : undefined
    }, 20_000, "the private pod's log")
    expect(log).toBe("private image\n")
  }, 90_000)
})

const kubectl = (kubeconfig: string, args: ReadonlyArray<string>, input?: string) =>
  new Promise<string>((resolve, reject) => {
    const child = execFile(process.env["KUBECTL"] ?? "/usr/bin/kubectl", ["--kubeconfig", kubeconfig, ...args], { timeout: 90_000 }, (e, stdout, stderr) =>
      e ? reject(new Error(`kubectl ${args.join(" ")}: ${e.message}\n${stderr}`)) : resolve(stdout)
    )
    if (input !== undefined) child.stdin!.end(input)
  })

describe("koder-fleet dev --driver runc runs registry images", () => {
  let dir: string
  let registry: Registry
  let dev: FleetProcess

  beforeAll(async () => {
    requireRunc()
    dir = await mkdtemp(join(tmpdir(), "fleet-dev-runc-"))
    registry = await startRegistry(join(dir, "registry"))
    await registry.push("public/web", "2", [base, { "etc/greeting": { content: "dev pulls\n" } }], { Cmd: ["/bin/sh", "-c", "cat /etc/greeting; exec sleep 3600"] })
    writeFileSync(join(dir, "registries.yaml"), `configs:\n  "${registry.host}":\n    tls:\n      ca_file: ${registry.caFile}\n`)
    dev = await start(["--listen", "127.0.0.1:0", "--driver", "runc", "--registries", join(dir, "registries.yaml"), "--node-name", "devrunc"], "dev", { FLEET_DATA_DIR: join(dir, "fleet") }, 60_000)
  }, 120_000)

  afterAll(async () => {
    if (dev !== undefined && dev.child.exitCode === null) {
      dev.child.kill("SIGINT")
      await Promise.race([dev.exited, new Promise((r) => setTimeout(r, 20_000))])
      if (dev.child.exitCode === null) dev.child.kill("SIGKILL")
    }
    await registry?.stop()
    if (dir) await rm(dir, { recursive: true, force: true })
  }, 60_000)

  it("kubectl apply, rollout status and logs of a Deployment from the registry", async () => {
    const yaml = `apiVersion: apps/v1
kind: Deployment
metadata: { name: web }
spec:
  replicas: 1
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      containers:
        - name: web
          image: ${registry.host}/public/web:2
`
    expect(await kubectl(dev.kubeconfig, ["apply", "-f", "-"], yaml)).toContain("deployment.apps/web created")
    await kubectl(dev.kubeconfig, ["rollout", "status", "deployment/web", "--timeout=60s"]).catch((e: Error) => {
      throw new Error(`${e.message}\n${dev.stdout().slice(-2000)}\n${dev.stderr().slice(-2000)}`)
    })
    const logs = await eventually(async () => {
      const out = await kubectl(dev.kubeconfig, ["logs", "deployment/web"]).catch(() => "")
      return out !== "" ? out : undefined
    }, 20_000, "the Deployment's logs")
    expect(logs).toBe("dev pulls\n")
    // The agent's Events are written once their pod is idle (EventRecorder): describe shows them soon after.
    const describe = await eventually(async () => {
      const out = await kubectl(dev.kubeconfig, ["describe", "pods", "-l", "app=web"])
      return /Successfully pulled image/.test(out) ? out : undefined
    }, 20_000, "the Pulled Event in describe")
    expect(describe).toMatch(new RegExp(`Image ID:\\s+${registry.host.replace(/\./g, "\\.")}/public/web@sha256:[0-9a-f]{64}`))
  }, 120_000)
})
