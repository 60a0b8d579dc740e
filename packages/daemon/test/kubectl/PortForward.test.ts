/**
 * `kubectl port-forward` on `koder-fleet dev` (issue 31): kubectl 1.32 tunnels SPDY/3.1 in a
 * WebSocket; two ports at once, HTTP through both, a large body each way, and the audit Event.
 * `@kubernetes/client-node`'s PortForward (v5/v4 channels) forwards to the same pod. Without a
 * ProcessControl consent, the forward is refused with the 403 naming it.
 */
import { KubeConfig, PortForward } from "@kubernetes/client-node"
import { createServer, type AddressInfo, type Server } from "node:net"
import { request as httpRequest } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { output, pollKubectl, startDev, waitForOutput, type KubectlCluster } from "./KubectlCluster.js"

// A pod of two HTTP servers: 8080 says hello (or sends ?bytes=n back), 8081 counts what it is sent.
const program = [
  "const h=require('http');",
  "h.createServer((q,s)=>{const m=/bytes=(\\d+)/.exec(q.url);if(m){s.end(Buffer.alloc(Number(m[1]),97));return}s.end('hello '+q.url+'\\n')}).listen(Number(process.env.FLEET_PORT_HELLO)||8080);",
  "h.createServer((q,s)=>{let n=0;q.on('data',c=>n+=c.length);q.on('end',()=>s.end('got '+n+'\\n'))}).listen(Number(process.env.FLEET_PORT_COUNTER)||8081)"
].join("")

const manifest = (namespace: string, consent: boolean) => `apiVersion: v1
kind: Namespace
metadata: {name: ${namespace}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: ${namespace}, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: web
      image: node
${
  consent
    ? `      command: ["node", "-e", ${JSON.stringify(program)}]
      # Host-network pods get a free host port per declared port (FLEET_PORT_<NAME>); a forward to
      # the container port reaches it. Ready once the servers listen.
      ports: [{name: hello, containerPort: 8080}, {name: counter, containerPort: 8081}]
      readinessProbe: {tcpSocket: {port: counter}, periodSeconds: 1}
`
    : // Host-network pods share the host's ports: the refused namespace's pod must not take 8080.
      `      command: ["sleep", "100000"]
`
}${
  consent
    ? `---
apiVersion: fleet.koder.dev/v1
kind: ProcessControl
metadata: {name: allow, namespace: ${namespace}}
spec: {}
`
    : ""
}`

/** An HTTP request to 127.0.0.1:port; the status and body. */
const http = (port: number, path: string, body?: Buffer): Promise<{ status: number; body: Buffer }> =>
  new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, method: body === undefined ? "GET" : "POST" }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.setTimeout(15_000, () => req.destroy(new Error("timed out")))
    req.end(body)
  })

let cluster: KubectlCluster

beforeAll(async () => {
  cluster = await startDev()
  await cluster.ok(["apply", "-f", "-"], { stdin: manifest("pf", true) })
  await cluster.ok(["apply", "-f", "-"], { stdin: manifest("pf-closed", false) })
  await cluster.ok(["wait", "--for=condition=Ready", "pod/web", "-n", "pf", "--timeout=40s"], { timeoutMs: 45_000 })
  await cluster.ok(["wait", "--for=condition=Ready", "pod/web", "-n", "pf-closed", "--timeout=40s"], { timeoutMs: 45_000 })
}, 120_000)

afterAll(async () => {
  await cluster?.stop()
})

describe("kubectl port-forward", () => {
  it("forwards two ports at once, with large bodies both ways, and records who did it", async () => {
    const pf = cluster.spawn(["port-forward", "-n", "pf", "pod/web", ":8080", ":8081"])
    await waitForOutput(pf, /Forwarding from 127\.0\.0\.1:\d+ -> 8081/)
    const local = [...output(pf).stdout.matchAll(/Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)/g)].map((m) => ({ local: Number(m[1]), remote: Number(m[2]) }))
    const hello = local.find((p) => p.remote === 8080)!.local
    const counter = local.find((p) => p.remote === 8081)!.local

    const [a, b] = await Promise.all([http(hello, "/first"), http(counter, "/", Buffer.alloc(4 * 1024 * 1024, 7))])
    expect(a.body.toString()).toBe("hello /first\n")
    expect(b.body.toString()).toBe("got 4194304\n")
    const big = await http(hello, "/?bytes=8000000")
    expect(big.body.length).toBe(8_000_000)
    // A second connection on the same forward is a new pair of streams.
    expect((await http(hello, "/again")).body.toString()).toBe("hello /again\n")
    pf.kill("SIGINT")

    const events = await pollKubectl(
      cluster,
      ["get", "events", "-n", "pf", "--field-selector", "reason=PortForward", "-o", "jsonpath={.items[*].message}"],
      (r) => /forwarded port\(s\) 8080, 8081/.test(r.stdout),
      15_000
    )
    expect(events.stdout).toMatch(/fleet:bootstrap-admin forwarded port\(s\) 8080, 8081 of the pod \(\d+ connection\(s\)\)/)
  }, 60_000)

  it("tells the user why when the namespace has not consented", async () => {
    const refused = await cluster.kubectl(["port-forward", "-n", "pf-closed", "pod/web", ":8080"], { timeoutMs: 20_000 })
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toMatch(/no ProcessControl in namespace "pf-closed" consents to forward ports of this pod/)
  }, 30_000)
})

describe("@kubernetes/client-node PortForward", () => {
  let server: Server | undefined
  afterAll(() => server?.close())

  it("forwards a local socket to the pod over the channel protocol", async () => {
    const kc = new KubeConfig()
    kc.loadFromFile(cluster.kubeconfig)
    const forward = new PortForward(kc)
    server = createServer((socket) => {
      void forward.portForward("pf", "web", [8080], socket, null, socket).catch(() => socket.destroy())
    })
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as AddressInfo).port
    const reply = await http(port, "/from-client-node")
    expect(reply.status).toBe(200)
    expect(reply.body.toString()).toBe("hello /from-client-node\n")
  }, 30_000)
})
