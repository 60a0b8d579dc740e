// The watch memory benchmark (issue 29): a namespace of 230 ConfigMaps of 10 KB (about 2.3 MB),
// then FLEET_BENCH_WATCHES (default 500) watches of it from resourceVersion 0 by one client, none
// of them read, and one GET meanwhile. One JSON line per result on stdout (progress on stderr):
//   watch.rv0.rssDelta     the server's resident memory 10 s after opening them, over before (MiB)
//   watch.rv0.get          one GET of a ConfigMap while they are open (ms)
// Both carry `admitted`, the watches answered 200 (the rest got 429), in their params.
// FLEET_BENCH_SERVER_FLAGS adds server flags, e.g. "--max-watches-inflight 1000 --watch-budget-per-user 0".
import { envWords, log, start } from "./BenchServer.js"
import { createNamespace, expectStatus, pool, print, round } from "./BenchKit.js"

const watches = Number(process.env["FLEET_BENCH_WATCHES"] ?? "500")
const flags = envWords("FLEET_BENCH_SERVER_FLAGS")
const server = await start(["--disable-controllers", "*", "--metrics-listen", "off", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off", ...flags])
try {
  const ns = "watch-memory"
  await createNamespace(server, ns)
  const blob = "x".repeat(10_000)
  await pool(230, 10, async (i) => {
    const r = await server.send("POST", `/api/v1/namespaces/${ns}/configmaps`, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `cm-${i}` }, data: { blob } })
    expectStatus("create configmap", r.status, r.body, 201)
  })
  await new Promise((r) => setTimeout(r, 2000))
  const before = server.rssMiB()?.now ?? NaN
  log(`${watches} watches from resourceVersion 0, unread; RSS before ${before.toFixed(0)} MiB`)
  const agent = server.agent(Number.MAX_SAFE_INTEGER)
  const opened = await Promise.all(Array.from({ length: watches }, () => server.stream(`/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=0`, agent)))
  let admitted = 0
  for (const w of opened) {
    if (w.status === 200) {
      admitted++
      w.response.pause()
    } else w.response.resume()
  }
  await new Promise((r) => setTimeout(r, 10_000))
  const after = server.rssMiB()?.now ?? NaN
  const started = performance.now()
  const get = await server.send("GET", `/api/v1/namespaces/${ns}/configmaps/cm-1`)
  expectStatus("get configmap", get.status, get.body, 200)
  const getMs = performance.now() - started
  const params = { watches, admitted, flags: flags.join(" ") }
  print({ bench: "watch.rv0.rssDelta", unit: "MiB", value: round(after - before), params })
  print({ bench: "watch.rv0.get", unit: "ms", value: round(getMs), params })
  for (const w of opened) w.response.destroy()
  agent.destroy()
} finally {
  await server.stop()
}
