/**
 * A request body under a size bound: read it whole, or fail fast once it passes the bound, and
 * drop the rest of a refused one so the 413 reaches the client.
 */
import { Effect } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"

/** How much of an oversized body is read and dropped before the connection is cut instead. */
const discardLimit = 16 * 1024 * 1024

/** The body passed the bound. */
export class BodyTooLarge {
  readonly _tag = "BodyTooLarge"
  /** Refused on its declared length, before any of it was read. */
  constructor(readonly declared: boolean) {}
}

/** The client went away before its body ended. */
export class ClientGone {
  readonly _tag = "ClientGone"
}

/**
 * Read the body, failing fast (without reading on) once it passes `max` bytes. Listening starts
 * at once, inside the 'request' event, so the body flows while the handler's fiber starts.
 */
export const read = (req: IncomingMessage, res: ServerResponse, max: number, expectsContinue: boolean): Effect.Effect<Uint8Array | undefined, BodyTooLarge | ClientGone> => {
  const declared = Number(req.headers["content-length"] ?? "0")
  if (Number.isFinite(declared) && declared > max) return Effect.fail(new BodyTooLarge(true))
  // `Expect: 100-continue`: invite the body only once its declared size is known to be fine.
  if (expectsContinue) res.writeContinue()
  if (req.readableEnded) return Effect.succeed(undefined)
  const result = new Promise<Uint8Array | undefined | BodyTooLarge | ClientGone>((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      req.off("data", onData)
      req.off("end", onEnd)
      req.off("error", onGone)
      req.off("aborted", onGone)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > max) {
        cleanup()
        req.pause()
        resolve(new BodyTooLarge(false))
      } else chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      resolve(size === 0 ? undefined : new Uint8Array(Buffer.concat(chunks, size)))
    }
    const onGone = () => {
      cleanup()
      resolve(new ClientGone())
    }
    req.on("data", onData)
    req.once("end", onEnd)
    req.once("error", onGone)
    req.once("aborted", onGone)
  })
  return Effect.flatMap(Effect.promise(() => result), (r) =>
    r instanceof BodyTooLarge || r instanceof ClientGone ? Effect.fail(r) : Effect.succeed(r)
  )
}

/**
 * Read and drop the rest of a refused body (up to `discardLimit` bytes, then the connection is
 * cut): closing a socket with unread input makes the kernel send a reset, which would often
 * destroy the 413 before the client reads it.
 */
export const discard = (req: IncomingMessage): void => {
  let discarded = 0
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.length
    if (discarded > discardLimit) req.socket.destroy()
  })
  req.resume()
}
