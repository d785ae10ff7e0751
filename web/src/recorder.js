// Video of the view: the canvas as a MediaStream, recorded to WebM in the browser.

export class VideoRecorder {
  constructor(canvas) {
    this.canvas = canvas;
    this.rec = null;
    this.chunks = [];
  }

  get active() { return this.rec != null; }

  start(fps = 60) {
    if (!this.canvas.captureStream || typeof MediaRecorder === 'undefined') return false;
    const types = ['video/webm;codecs=vp9', 'video/webm;codecs=vp8', 'video/webm'];
    const mimeType = types.find((t) => MediaRecorder.isTypeSupported(t)) || '';
    const stream = this.canvas.captureStream(fps);
    this.chunks = [];
    this.rec = new MediaRecorder(stream, mimeType ? { mimeType, videoBitsPerSecond: 8e6 } : undefined);
    this.rec.ondataavailable = (e) => { if (e.data && e.data.size) this.chunks.push(e.data); };
    this.rec.start(250);
    return true;
  }

  stop() {
    const rec = this.rec;
    this.rec = null;
    return new Promise((resolve) => {
      rec.onstop = () => {
        const blob = new Blob(this.chunks, { type: 'video/webm' });
        const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
        resolve({ url: URL.createObjectURL(blob), filename: `motionmatch-${stamp}.webm`, bytes: blob.size });
      };
      rec.stop();
    });
  }
}
