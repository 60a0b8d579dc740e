/**
 * `kfleet` against a real `koder-fleet dev` (one per file: API server, controllers, scheduler,
 * box and agent; pods are host processes): get/describe layouts (golden files, ages and addresses
 * normalised), apply of the hello example twice (the second run `unchanged`), an edited file
 * patching only what changed, rollout undo restoring the previous image, logs -f streaming, a
 * drain stopped by a PodDisruptionBudget saying why, a malformed file reported by path and line.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { createServer, type AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, start, type Dev } from "./fixtures/Dev.js"
import { kfleet as run, type RunOptions } from "./fixtures/Kfleet.js"

const hello = fileURLToPath(new URL("../../../examples/hello", import.meta.url))

/** Ages, timestamps, addresses and counts vary from run to run; tables are re-aligned after. */
const normalise = (text: string, vary: (s: string) => string = (x) => x) =>
  realign(
    vary(
      text
        .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/g, "<time>")
        .replace(/\b\d+(\.\d+){3}\b/g, "<ip>")
        .replace(/(?<= {3}|\()\d+[smhd](\d+[smh])?(?=\s|$| ago)/gm, "<age>")
    )
  )

/** Re-pad runs of table lines (three or more columns, three spaces apart) after normalising. */
const realign = (text: string) => {
  const lines = text.split("\n")
  const cells = lines.map((l) => l.trimStart().split(/ {3,}/))
  const out: Array<string> = []
  for (let i = 0; i < lines.length; ) {
    if (cells[i]!.length < 3) {
      out.push(lines[i++]!)
      continue
    }
    let j = i
    while (j < lines.length && cells[j]!.length === cells[i]!.length) j++
    const widths = cells[i]!.map((_, c) => Math.max(...cells.slice(i, j).map((r) => r[c]!.length)))
    for (let k = i; k < j; k++) {
      const indent = /^ */.exec(lines[k]!)![0]
      out.push(indent + cells[k]!.map((v, c) => (c === widths.length - 1 ? v : v.padEnd(widths[c]!))).join("   ").trimEnd())
    }
    i = j
  }
  return out.join("\n")
}

const node = "clitest"

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as AddressInfo).port
      s.close(() => resolve(port))
    })
  })

const sleeper = (name: string, image: string, replicas = 1, labels: Record<string, string> = {}) => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  replicas: ${replicas}
  selector:
    matchLabels: {app: ${name}}
  template:
    metadata:
      labels: ${JSON.stringify({ app: name, ...labels })}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: ${image}
          command: ["node", "-e", "let i = 0; setInterval(() => console.log('tick ' + i++), 200)"]
`

describe("kfleet against koder-fleet dev", () => {
  let dir: string
  let dev: Dev
  const kfleet = (args: ReadonlyArray<string>, options: RunOptions = {}) => run(args, { kubeconfig: dev.kubeconfig, ...options })

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kfleet-"))
    dev = await start(join(dir, "data"), ["--listen", "127.0.0.1:0", "--node-name", node])
  }, 130_000)

  afterAll(async () => {
    await dev?.stop()
    await rm(dir, { recursive: true, force: true })
  }, 20_000)

  it("applies the hello example: created, then unchanged on the second run", async () => {
    const first = await kfleet(["apply", "-f", hello])
    expect(first.err).toBe("")
    expect(first.out.split("\n").filter(Boolean).sort()).toEqual(["deployment.apps/hello created", "ingress.networking.k8s.io/hello created", "service/hello created"])
    const second = await kfleet(["apply", "-f", hello])
    expect(second.code).toBe(0)
    expect(second.out.split("\n").filter(Boolean).sort()).toEqual(["deployment.apps/hello unchanged", "ingress.networking.k8s.io/hello unchanged", "service/hello unchanged"])
  })

  it("prints get and describe as kubectl lays them out", async () => {
    await expect(normalise((await kfleet(["get", "nodes"])).out)).toMatchFileSnapshot("golden/get-nodes.txt")
    await expect(normalise((await kfleet(["get", "svc,deploy", "-l", "app=hello", "-o", "wide"])).out, (x) => x.replace(/\d\/2( +)\d( +)\d/, "<n>/2$1<n>$2<n>"))).toMatchFileSnapshot("golden/get-svc-deploy-wide.txt")
    await expect(normalise((await kfleet(["describe", "service", "hello"])).out)).toMatchFileSnapshot("golden/describe-service.txt")
    await expect(normalise((await kfleet(["describe", "deployment", "hello"])).out, (x) =>
        x.replace(/\d+ (updated|total|available|unavailable)/g, "<n> $1").replace(/^( {2}(?:Available|Progressing) +)\S+( +)\S+$/gm, "$1<status>$2<reason>")
      )).toMatchFileSnapshot("golden/describe-deployment.txt")
    const names = await kfleet(["get", "pods", "-l", "app=hello", "-o", "jsonpath={range .items[*]}{.metadata.labels.app}{\"\\n\"}{end}"])
    expect(names.out).toBe("hello\nhello\n")
    const missing = await kfleet(["get", "deployment", "nope"])
    expect({ code: missing.code, err: missing.err }).toEqual({ code: 1, err: 'error: deployments.apps "nope" not found\n' })
  })

  it("applies an edited file: patches only what changed, keeps other writers' fields", async () => {
    const file = join(dir, "deployment.yaml")
    const original = await readFile(join(hello, "deployment.yaml"), "utf8")
    // Another writer pauses the Deployment; the user edits the greeting and drops the metadata label.
    expect((await kfleet(["rollout", "pause", "deployment/hello"])).out).toBe("deployment.apps/hello paused\n")
    const before = JSON.parse((await kfleet(["get", "deployment", "hello", "-o", "json"])).out)
    await writeFile(file, original.replace("value: hello from Koder Fleet", "value: hello again").replace("  labels:\n    app: hello\nspec:", "spec:"))
    const dry = await kfleet(["apply", "-f", file, "--dry-run=server"])
    expect(dry.out).toBe("deployment.apps/hello configured (server dry run)\n")
    expect(JSON.parse((await kfleet(["get", "deployment", "hello", "-o", "json"])).out).metadata.generation).toBe(before.metadata.generation)
    const diff = await kfleet(["diff", "-f", file])
    expect(diff.code).toBe(1)
    expect(diff.out).toMatch(/^-\s+value: hello from Koder Fleet$/m)
    expect(diff.out).toMatch(/^\+\s+value: hello again$/m)
    const applied = await kfleet(["apply", "-f", file])
    expect(applied.out).toBe("deployment.apps/hello configured\n")
    const after = JSON.parse((await kfleet(["get", "deployment", "hello", "-o", "json"])).out)
    expect(after.spec.template.spec.containers[0].env[0]).toEqual({ name: "GREETING", value: "hello again" })
    expect(after.metadata.labels["app"]).toBeUndefined()
    expect(after.metadata.labels["fleet.koder.dev/region"]).toBe("local")
    expect(after.spec.replicas).toBe(2)
    expect(after.spec.paused).toBe(true)
    expect(after.metadata.generation).toBe(before.metadata.generation + 1)
    expect((await kfleet(["apply", "-f", file])).out).toBe("deployment.apps/hello unchanged\n")
    expect((await kfleet(["rollout", "resume", "deployment/hello"])).out).toBe("deployment.apps/hello resumed\n")
  })

  it("rollout undo restores the previous image", async () => {
    const file = join(dir, "web.yaml")
    await writeFile(file, sleeper("web", "node:20"))
    expect((await kfleet(["apply", "-f", file])).out).toBe("deployment.apps/web created\n")
    const status = await kfleet(["rollout", "status", "deployment/web", "--timeout=60s"])
    expect(status.out).toContain('deployment "web" successfully rolled out')
    await writeFile(file, sleeper("web", "node:22"))
    expect((await kfleet(["apply", "-f", file])).out).toBe("deployment.apps/web configured\n")
    await eventually(async () => /^2\s/m.test((await kfleet(["rollout", "history", "deployment/web"])).out) || undefined, 30_000, "revision 2")
    const undo = await kfleet(["rollout", "undo", "deployment/web"])
    expect(undo).toEqual({ code: 0, out: "deployment.apps/web rolled back\n", err: "" })
    expect((await kfleet(["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"])).out).toBe("node:20")
    const history = await eventually(async () => {
      const h = (await kfleet(["rollout", "history", "deploy/web"])).out
      return /^3\s/m.test(h) ? h : undefined
    }, 30_000, "revision 3")
    expect(history.split("\n").slice(2, 4).map((l) => l.split(/\s+/)[0])).toEqual(["2", "3"])
  })

  it("logs -f streams a container's output as it is written", async () => {
    const file = join(dir, "ticker.yaml")
    await writeFile(file, sleeper("ticker", "node:20"))
    await kfleet(["apply", "-f", file])
    expect((await kfleet(["wait", "--for=jsonpath={.status.phase}=Running", "pods", "-l", "app=ticker", "--timeout=60s"])).code).toBe(0)
    const controller = new AbortController()
    const seen = new Promise<string>((resolve) => {
      const result = kfleet(["logs", "-f", "deployment/ticker"], {
        signal: controller.signal,
        onOut: (out) => {
          // Three lines that arrive after the command started: the stream is live.
          if ((out.match(/tick \d+/g) ?? []).length >= 3) controller.abort()
        }
      })
      void result.then((r) => resolve(r.out))
    })
    const out = await seen
    const ticks = (out.match(/tick (\d+)/g) ?? []).map((l) => Number(l.slice(5)))
    expect(ticks.length).toBeGreaterThanOrEqual(3)
    expect(ticks).toEqual([...ticks].sort((a, b) => a - b))
    const tail = await kfleet(["logs", "deployment/ticker", "--tail=1"])
    expect(tail.out).toMatch(/^tick \d+\n$/)
  })

  it("reports a malformed manifest with its file and line, and applies nothing", async () => {
    const file = join(dir, "bad.yaml")
    await writeFile(file, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  key: a: b\n")
    const r = await kfleet(["apply", "-f", file])
    expect(r.code).toBe(1)
    expect(r.err).toMatch(new RegExp(`^error: error parsing ${file.replace(/[.]/g, "\\.")}: line 6, column 8: Nested mappings are not allowed in compact mappings\n$`))
    expect((await kfleet(["get", "configmap", "bad"])).code).toBe(1)
  })

  it("drain stops at a PodDisruptionBudget and says why", async () => {
    const file = join(dir, "guarded.yaml")
    await writeFile(
      file,
      `${sleeper("guarded", "node:20")}---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: guarded
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: guarded}
`
    )
    expect((await kfleet(["apply", "-f", file])).code).toBe(0)
    await kfleet(["wait", "--for=jsonpath={.status.phase}=Running", "pods", "-l", "app=guarded", "--timeout=60s"])
    const started = Date.now()
    const r = await kfleet(["drain", node, "--timeout=4s"])
    expect(Date.now() - started).toBeLessThan(15_000)
    expect(r.code).toBe(1)
    expect(r.out).toContain(`node/${node} cordoned`)
    expect(r.err).toContain("Cannot evict pod as it would violate the pod's disruption budget")
    expect(r.err).toMatch(/PodDisruptionBudget "guarded" \(minAvailable 1/)
    expect((await kfleet(["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"])).out).toBe("true")
    expect((await kfleet(["uncordon", node])).out).toBe(`node/${node} uncordoned\n`)
  })

  it("an unreachable server is reported with its URL and the cause within 5 s", async () => {
    // A closed port refuses at once; a server that never answers the TLS handshake times out.
    const closed = await freePort()
    const silent = createServer(() => undefined)
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    try {
      for (const [port, cause] of [
        [closed, `connect ECONNREFUSED 127.0.0.1:${closed}`],
        [(silent.address() as AddressInfo).port, "connect timeout"]
      ] as const) {
        const server = `https://127.0.0.1:${port}`
        const started = Date.now()
        const r = await run(["get", "pods", "--kubeconfig", join(dir, "none"), "--server", server])
        expect(Date.now() - started).toBeLessThan(5_000)
        expect(r).toEqual({ code: 1, out: "", err: `error: cannot reach ${server}: ${cause}\n` })
      }
    } finally {
      silent.close()
    }
  })
})
