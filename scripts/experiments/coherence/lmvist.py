import sys, json, random, time
sys.argv=[sys.argv[0],'0']
exec(open(__import__('os').path.join(__import__('os').path.dirname(__file__), 'lmexp.py')).read().split("for ds in ['vwp']:")[0])
N=int(__import__('os').environ.get('N','400'))
sth,ch=load('vist','gt_test'); stl,cl=load('vist','llava_vc_p3')
ids=sorted(i for i in ch if i in cl); ids=sorted(random.Random(0).sample(ids,N))
for s,st in [('gt_test',sth),('llava_vc_p3',stl)]:
    t=time.time(); F={i:story_feats(st[i]) for i in ids}
    print('vist',s,len(ids),'time/story',(time.time()-t)/len(ids),flush=True)
    json.dump(F,open(f'lmfeat_vist_{s}.json','w'))
