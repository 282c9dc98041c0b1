/**
 * A `text/event-stream` decoder following the WHATWG rules (any of CRLF, LF or CR ends a line, comments and unknown
 * fields are skipped, `data:` lines join with LF, an `id:` with NUL is ignored), fed the text as it arrives in
 * chunks of any size.
 */

/** One dispatched event, before its data is read as JSON. */
export interface SseMessage {
  /** `message` when the event names no type. */
  type: string;
  data: string;
  /** The last event id seen so far on this stream (the `id:` of this event, or an earlier one). */
  lastEventId: string | undefined;
}

export class SseDecoder {
  /** What `Last-Event-ID` should say on a reconnect: the id of the last event that carried one. */
  lastEventId: string | undefined;
  private buffer = '';
  private type = '';
  private data: string[] = [];
  private pendingId: string | undefined;
  private sawCarriageReturn = false;

  constructor(lastEventId?: string) {
    this.lastEventId = lastEventId;
  }

  /** Feeds text; returns the events it completed, in order. */
  push(text: string): SseMessage[] {
    const messages: SseMessage[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const char = text.charCodeAt(i);
      if (char === 10 /* \n */ && this.sawCarriageReturn && i === start && this.buffer === '') {
        // The LF of a CRLF whose CR ended the previous chunk.
        this.sawCarriageReturn = false;
        start = i + 1;
        continue;
      }
      if (char === 10 || char === 13) {
        const line = this.buffer + text.slice(start, i);
        this.buffer = '';
        const message = this.line(line);
        if (message) messages.push(message);
        if (char === 13 && text.charCodeAt(i + 1) === 10) i++;
        this.sawCarriageReturn = char === 13 && i === text.length - 1;
        start = i + 1;
      } else {
        this.sawCarriageReturn = false;
      }
    }
    this.buffer += text.slice(start);
    return messages;
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.type = value;
        break;
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) this.pendingId = value;
        break;
      default:
        // `retry:` and unknown fields: reconnect timing is the client's own policy.
        break;
    }
    return undefined;
  }

  private dispatch(): SseMessage | undefined {
    if (this.pendingId !== undefined) this.lastEventId = this.pendingId;
    // No data, no event (WHATWG): an `id:` alone only moves the position.
    const hasData = this.data.join('\n') !== '';
    const message: SseMessage = { type: this.type || 'message', data: this.data.join('\n'), lastEventId: this.lastEventId };
    this.type = '';
    this.data = [];
    this.pendingId = undefined;
    return hasData ? message : undefined;
  }
}
