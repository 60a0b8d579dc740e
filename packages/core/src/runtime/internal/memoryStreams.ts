/**
 * Streaming exec and attach of the memory runtime. An exec session gathers stdin until the
 * caller ends it (at once without stdin), then answers with the behavior's exec result as
 * frames: stdout, stderr (or both on channel 1 with a TTY), and the exit Status. An attach
 * session carries the container's new lines and ends with its exit Status, or when closed.
 */
import { Deferred, Effect, Exit, Fiber, FiberSet, PubSub, Scope, Stream } from "effect"
import * as Runtime from "../Runtime.js"
import * as StreamSession from "../StreamSession.js"
import { type Node, entryOf, notRunning, record } from "./memoryNode.js"

const decoder = new TextDecoder()

/** `Containers.execStream`. */
export const execStream = (
  node: Node,
  id: string,
  request: StreamSession.ExecStreamRequest
): Effect.Effect<StreamSession.StreamSession, Runtime.NotFound | Runtime.Invalid> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    if (e.container.status.state !== "running") return yield* notRunning(id)
    if (request.command.length === 0) return yield* new Runtime.Invalid({ message: "command: required" })
    record(node, "container.execStream", id, request.command.join(" "))
    const out = StreamSession.queue()
    let stdin = ""
    let answered = false
    const answer = () => {
      if (answered) return
      answered = true
      const result = e.behavior.exec?.({ command: request.command, stdin }, e.container) ?? { exitCode: 0, stdout: "", stderr: "", timedOut: false }
      if (result.stdout !== "") out.push(StreamSession.text(StreamSession.Channel.stdout, result.stdout))
      if (result.stderr !== "") out.push(StreamSession.text(request.tty ? StreamSession.Channel.stdout : StreamSession.Channel.stderr, result.stderr))
      out.push(StreamSession.statusFrame(StreamSession.exitStatus(result.exitCode, request.command)))
      out.end()
    }
    if (!request.stdin) answer()
    return {
      send: (frame) => {
        if (frame.channel === StreamSession.Channel.stdin) stdin += decoder.decode(frame.data)
        else if (frame.channel === StreamSession.Channel.close && frame.data[0] === StreamSession.Channel.stdin) answer()
      },
      frames: out.frames,
      close: () => out.end()
    }
  })

/** `Containers.attach`: the container's lines from now on, then its exit Status once it exited. */
export const attach = (node: Node, id: string): Effect.Effect<StreamSession.StreamSession, Runtime.NotFound | Runtime.Invalid> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    if (e.container.status.state !== "running") return yield* notRunning(id)
    record(node, "container.attach", id)
    const out = StreamSession.queue()
    // Subscribed now, not when the fiber starts: a stop right after attach must still end it.
    const scope = yield* Scope.make()
    const sub = yield* Scope.extend(PubSub.subscribe(e.feed), scope)
    const follow = Stream.fromQueue(sub).pipe(
      Stream.takeWhile((l): l is NonNullable<typeof l> => l !== null),
      Stream.runForEach((l) =>
        Effect.sync(() => out.push(StreamSession.text(l.stream === "stdout" ? StreamSession.Channel.stdout : StreamSession.Channel.stderr, l.line)))
      ),
      Effect.zipRight(Deferred.await(e.exited)),
      Effect.zipRight(
        Effect.sync(() => {
          const status = e.container.status
          out.push(StreamSession.statusFrame(StreamSession.exitStatus(status.state === "exited" ? (status.exitCode ?? 0) : 0)))
          out.end()
        })
      ),
      Effect.ensuring(Scope.close(scope, Exit.void))
    )
    const fiber = yield* FiberSet.run(node.fibers, follow)
    return {
      send: () => undefined,
      frames: out.frames,
      close: () => {
        out.end()
        Effect.runFork(Fiber.interrupt(fiber))
      }
    }
  })
