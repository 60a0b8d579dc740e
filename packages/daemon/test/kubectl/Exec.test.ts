/**
 * `kubectl exec`, `exec -i`, `exec -it`, `attach` and `cp` on `koder-fleet dev` (issue 31): kubectl
 * 1.32 speaks v5.channel.k8s.io over a WebSocket; the API server relays the frames to the node,
 * the node to the box, the box to the process (on a pseudo-terminal with `-t`). `@kubernetes/
 * client-node`'s Exec and Attach classes against the same pods. Without a ProcessControl consent,
 * exec is refused with the 403 naming it.
 */
import { Attach, Exec, KubeConfig, type V1Status } from "@kubernetes/client-node"
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readFile } from "node:fs/promises"
import { join } from "node:path"
import { PassThrough, Writable } from "node:stream"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { kubectlPath, output, pollKubectl, startDev, waitForOutput, type KubectlCluster } from "./KubectlCluster.js"

const manifest = (namespace: string, consent: boolean) => `apiVersion: v1
kind: Namespace
metadata: {name: ${namespace}}
---
apiVersion: v1
kind: Pod
metadata: {name: shell, namespace: ${namespace}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: shell
      image: busybox
      command: ["sh", "-c", "echo started; exec sleep 100000"]
---
apiVersion: v1
kind: Pod
metadata: {name: ticker, namespace: ${namespace}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: ticker
      image: busybox
      command: ["sh", "-c", "i=0; while :; do echo tick-$i; echo tock-$i >&2; i=$((i+1)); sleep 0.2; done"]
${
  consent
    ? `---
apiVersion: fleet.koder.dev/v1
kind: ProcessControl
metadata: {name: allow, namespace: ${namespace}}
spec: {}
`
    : ""
}`

let cluster: KubectlCluster

beforeAll(async () => {
  cluster = await startDev()
  await cluster.ok(["apply", "-f", "-"], { stdin: manifest("ex", true) })
  await cluster.ok(["apply", "-f", "-"], { stdin: manifest("ex-closed", false) })
  for (const ns of ["ex", "ex-closed"])
    await cluster.ok(["wait", "--for=condition=Ready", "pod/shell", "pod/ticker", "-n", ns, "--timeout=40s"], { timeoutMs: 45_000 })
}, 120_000)

afterAll(async () => {
  await cluster?.stop()
})

/** Run `command` under util-linux `script`, which gives it a terminal of `cols`x`rows`. */
const onTerminal = (command: string, input: string, cols: number, rows: number, ms = 30_000) =>
  new Promise<{ code: number; text: string }>((resolve, reject) => {
    const child = spawn("script", ["-qefc", `stty cols ${cols} rows ${rows}; ${command}`, "/dev/null"], {
      env: { ...process.env, HOME: join(cluster.dir, "kubectl-home"), KUBECONFIG: cluster.kubeconfig },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let text = ""
    child.stdout.on("data", (d: Buffer) => (text += d.toString()))
    child.stderr.on("data", (d: Buffer) => (text += d.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), ms)
    child.once("error", reject)
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code: code ?? -1, text })
    })
    // Typed a moment after the remote shell is up, as a person would.
    setTimeout(() => child.stdin.write(input), 1_500)
  })

describe("kubectl exec", () => {
  it("runs a command: stdout and stderr apart, the exit code propagated", async () => {
    const r = await cluster.kubectl(["exec", "-n", "ex", "shell", "--", "sh", "-c", "echo out; echo err >&2"])
    expect(r).toMatchObject({ code: 0, stdout: "out\n" })
    expect(r.stderr).toContain("err")
    const failed = await cluster.kubectl(["exec", "-n", "ex", "pod/shell", "-c", "shell", "--", "sh", "-c", "exit 7"])
    expect(failed.code).toBe(7)
    expect(failed.stderr).toContain("command terminated with exit code 7")
  })

  it("-i feeds stdin to the command, a megabyte of it intact", async () => {
    expect(await cluster.ok(["exec", "-i", "-n", "ex", "shell", "--", "cat"], { stdin: "hello\nworld\n" })).toBe("hello\nworld\n")
    const big = randomBytes(1 << 20).toString("base64")
    const counted = await cluster.ok(["exec", "-i", "-n", "ex", "shell", "--", "sh", "-c", "wc -c; echo done"], { stdin: big })
    expect(counted.trim().split(/\s+/)).toEqual([String(big.length), "done"])
  })

  it("-it gives the command a terminal of the caller's size, and the caller's keys", async () => {
    const r = await onTerminal(
      `${kubectlPath} --kubeconfig ${cluster.kubeconfig} exec -it -n ex shell -- sh -c 'tty; stty size; read name; echo "hello $name"; exit 3'`,
      "fleet\r",
      91,
      17
    )
    expect(r.text).toMatch(/\/dev\/pts\/\d+/)
    expect(r.text).toContain("17 91")
    expect(r.text).toContain("hello fleet")
    expect(r.code).toBe(3)
  })

  it("is refused without the namespace's ProcessControl consent", async () => {
    const r = await cluster.kubectl(["exec", "-n", "ex-closed", "shell", "--", "true"])
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(/ProcessControl/)
  })
})

describe("kubectl attach and cp", () => {
  it("attach shows the container's output as it is written, stdout and stderr", async () => {
    const attached = cluster.spawn(["attach", "-n", "ex", "ticker"])
    const first = Number((await waitForOutput(attached, /tick-(\d+)/))[1])
    await waitForOutput(attached, new RegExp(`tick-${first + 2}\\b`))
    await waitForOutput(attached, /tock-\d+/, 20_000, "stderr")
    attached.kill("SIGINT")
    // Output from the moment of attaching: nothing older than the first line seen.
    expect(output(attached).stdout).not.toContain("tick-0\n")
  })

  it("cp copies a file into the pod and back, byte for byte", async () => {
    const content = randomBytes(300_000).toString("hex")
    const local = await cluster.writeFile("cp/source.txt", content)
    const remote = `/tmp/fleet-cp-${randomBytes(4).toString("hex")}`
    await cluster.ok(["exec", "-n", "ex", "shell", "--", "mkdir", "-p", remote])
    await cluster.ok(["cp", local, `ex/shell:${remote}/in.txt`], { timeoutMs: 60_000 })
    expect((await cluster.ok(["exec", "-n", "ex", "shell", "--", "sh", "-c", `wc -c < ${remote}/in.txt`])).trim()).toBe(String(content.length))
    const back = join(cluster.dir, "files", "cp", "back.txt")
    await cluster.ok(["cp", `ex/shell:${remote}/in.txt`, back], { timeoutMs: 60_000 })
    expect(await readFile(back, "utf8")).toBe(content)
    await cluster.ok(["exec", "-n", "ex", "shell", "--", "rm", "-rf", remote])
  })

  it("exec and attach are audited: Events name the user, the command and how it ended", async () => {
    const events = await pollKubectl(cluster, ["get", "events", "-n", "ex", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}"], (r) =>
      /Exec: \S+ ran "sh" with 2 argument\(s\) in container "shell": exit code 7/.test(r.stdout) && /Attach: \S+ attached to container "ticker"/.test(r.stdout)
    )
    expect(events.stdout).toMatch(/Exec: \S+ ran "sh" with 2 argument\(s\) in container "shell" on a terminal: exit code 3/)
  })
})

describe("@kubernetes/client-node Exec and Attach", () => {
  const config = () => {
    const kc = new KubeConfig()
    kc.loadFromFile(cluster.kubeconfig)
    return kc
  }
  const sink = () => {
    let text = ""
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        text += chunk.toString()
        done()
      }
    })
    return { stream, text: () => text }
  }

  it("Exec: output, stdin and the exit Status", async () => {
    const out = sink()
    const err = sink()
    const stdin = new PassThrough()
    const status = await new Promise<V1Status>((resolve, reject) => {
      void new Exec(config())
        .exec("ex", "shell", "shell", ["sh", "-c", "cat; echo oops >&2; exit 2"], out.stream, err.stream, stdin, false, (s) => resolve(s))
        .then(() => stdin.end("from client-node\n"), reject)
    })
    expect(out.text()).toBe("from client-node\n")
    expect(err.text()).toBe("oops\n")
    expect(status).toMatchObject({ status: "Failure", reason: "NonZeroExitCode", details: { causes: [{ reason: "ExitCode", message: "2" }] } })
  })

  it("Attach: the running container's output", async () => {
    const out = sink()
    const ws = await new Attach(config()).attach("ex", "ticker", "ticker", out.stream, null, null, false)
    const deadline = Date.now() + 20_000
    while (!/tick-\d+/.test(out.text()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    ws.close()
    expect(out.text()).toMatch(/tick-\d+\n/)
  })
})
