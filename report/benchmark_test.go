package report

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkRows50k opens a 50,000-row report in headless Chromium and
// scrolls its matrix from top to bottom, five view heights a step. It
// reports the first render (navigation until the script has drawn the
// page; goal under 1 s) and the longest and mean frame while scrolling
// (goal: no frame over 100 ms) as metrics; it asserts no time.
//
//	go test ./report -run '^$' -bench Rows50k -benchtime 1x
func BenchmarkRows50k(b *testing.B) {
	d := LargeData(50_000)
	dir := b.TempDir()
	ctx, page := openReport(b, d, dir)
	id := "kind-" + slug(d.Kinds[0].Name)
	var first, maxFrame, meanFrame time.Duration
	frames := 0
	for b.Loop() {
		start := time.Now()
		if err := chromedp.Run(ctx, chromedp.Navigate("file://"+page), waitReady()); err != nil {
			b.Fatal(err)
		}
		first += time.Since(start)
		// Each step scrolls and waits for the frame that draws it and the
		// next: a step's time is two frames plus whatever the draw cost.
		got := eval[[]float64](b, ctx, fmt.Sprintf(`new Promise(done=>{
			const vp=document.getElementById("vp-%s"), end=vp.scrollHeight-vp.clientHeight, times=[];
			let t0=performance.now();
			const step=()=>{
				const now=performance.now(); times.push(now-t0); t0=now;
				if (vp.scrollTop>=end) { done(times); return; }
				vp.scrollTop=Math.min(end, vp.scrollTop+5*vp.clientHeight);
				requestAnimationFrame(()=>requestAnimationFrame(step));
			};
			requestAnimationFrame(step);
		})`, id))
		for _, ms := range got[1:] {
			f := time.Duration(ms * float64(time.Millisecond))
			maxFrame = max(maxFrame, f)
			meanFrame += f
			frames++
		}
	}
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms/first-render")
	b.ReportMetric(float64(maxFrame.Microseconds())/1000, "ms/max-step")
	if frames > 0 {
		b.ReportMetric(float64(meanFrame.Microseconds())/1000/float64(frames), "ms/mean-step")
	}
	b.ReportMetric(float64(frames)/float64(b.N), "steps/scroll")
}
