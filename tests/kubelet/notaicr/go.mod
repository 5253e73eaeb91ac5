module aicr.test/notaicr

go 1.22
