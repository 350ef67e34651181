package studies

// The external tests (package studies_test, which can use the fixtures of
// rig/studies/studytest) reach these test helpers of the package's own.
var (
	DemoTasks  = demoTasks
	DemoSpeeds = demoSpeeds
)
