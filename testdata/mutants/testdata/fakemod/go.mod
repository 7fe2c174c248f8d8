module fakemod

go 1.26
