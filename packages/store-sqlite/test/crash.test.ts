// Durability under kill -9: a child process writes with many writes in flight and reports each
// acknowledged write; the test SIGKILLs it mid-load, reopens the file, and checks that every
// acknowledged write is there, that the revision never went back, and that writing continues
// densely. Several rounds on one file (FLEET_CRASH_ROUNDS, default 5).
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { SqliteStore } from "../src/index.js"

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const rounds = Number(process.env.FLEET_CRASH_ROUNDS ?? 5)

interface Ack {
  readonly revision: number
  readonly value: string
}

/** Run the writer until it has acknowledged `killAfter` writes, then SIGKILL it. */
const runAndKill = (filename: string, round: number, killAfter: number) =>
  new Promise<Array<[string, Ack]>>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--conditions=@koder/source", "--import", "tsx", "test/fixtures/crash-writer.ts", filename, String(round)],
      { cwd: packageDir, stdio: ["ignore", "pipe", "pipe"] }
    )
    const acks: Array<[string, Ack]> = []
    let stderr = ""
    let killed = false
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    readline.createInterface({ input: child.stdout }).on("line", (line) => {
      if (line === "ready" || killed) return
      const [revision, key, value] = line.split(" ")
      acks.push([key!, { revision: Number(revision), value: value! }])
      if (acks.length >= killAfter) {
        killed = true
        child.kill("SIGKILL")
      }
    })
    child.on("exit", (code, signal) => {
      if (signal === "SIGKILL") resolve(acks)
      else reject(new Error(`crash-writer exited early (code ${code}): ${stderr}`))
    })
  })

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fleet-crash-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

describe("SqliteStore crash safety", () => {
  it(`keeps every acknowledged write across ${rounds} kill -9 rounds`, { timeout: 60_000 }, async () => {
    const filename = path.join(dir, "store.db")
    // Every acknowledged write so far, newest per key.
    const acked = new Map<string, Ack>()
    let maxAcked = 0
    for (let round = 0; round < rounds; round++) {
      // Kill at a different point each round (deterministic, so a failure reproduces).
      const killAfter = 500 + ((round * 7919) % 2500)
      const acks = await runAndKill(filename, round, killAfter)
      expect(acks.length).toBeGreaterThanOrEqual(killAfter)
      for (const [key, ack] of acks) {
        if ((acked.get(key)?.revision ?? 0) < ack.revision) acked.set(key, ack)
        maxAcked = Math.max(maxAcked, ack.revision)
      }
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const store = yield* SqliteStore.make({ filename })
            const revision = yield* store.currentRevision
            expect(revision).toBeGreaterThanOrEqual(maxAcked)
            for (const [key, ack] of acked) {
              const kv = yield* store.get(key)
              // A later write may have committed without its acknowledgement being read; never an older one.
              expect(kv.modRevision).toBeGreaterThanOrEqual(ack.revision)
              if (kv.modRevision === ack.revision) expect(kv.value).toBe(ack.value)
            }
            // Writing continues densely after the recovered head.
            for (let i = 1; i <= 5; i++) {
              expect((yield* store.create(`/after/${round}/${i}`, "x")).modRevision).toBe(revision + i)
            }
            maxAcked = revision + 5
          })
        )
      )
    }
  })
})
